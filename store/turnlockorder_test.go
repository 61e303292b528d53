package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// Writers that lock several of a user's turns lock them in (turn_at,
// event_id) order, as an extraction's save, a burst's claim and a replay's
// requeue (RequeueTurns) do. One that locked them in another order (by
// event id, or as its update met them) beside a replay requeueing the same
// turns, of an event id order other than their time order, each held a
// turn the other waited for and Postgres failed one (40P01).
//
// Each test below forces that interleaving: the replay's batch holds a
// third turn between the two in time, which a third transaction holds, so
// the replay locks the earlier turn and waits; the writer is started and
// runs until it waits for the replay (or, locking by event id, holds the
// later turn first); then the third transaction ends. Both must succeed.

// A re-extraction of turns the offline extractor processed (ReplaceOffline).
func TestReplayBesideReplaceOfflineOfDisorderedTurns(t *testing.T) {
	ctx, s := setup(t)
	disorderedTurns(t, ctx, s, func(ids []string) error {
		return s.MarkProcessed(ctx, "alice", ids, store.Provenance{Extractor: "rules"})
	})
	replayBeside(t, s, func(ctx context.Context) error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "alice", EventIDs: []string{"a", "b"}, Offline: "rules",
				Provenance: store.Provenance{Extractor: "llm", Model: "m"}})
			return err
		})
	})
}

// A retry of failed turns (ResetFailed), oldest received first, which is
// not their time order.
func TestReplayBesideRetryOfDisorderedFailedTurns(t *testing.T) {
	ctx, s := setup(t)
	disorderedTurns(t, ctx, s, func(ids []string) error {
		return s.MarkFailed(ctx, "alice", ids, "boom", true)
	})
	replayBeside(t, s, func(ctx context.Context) error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ResetFailed(ctx, []store.TurnKey{{UserID: "alice", EventID: "a"}, {UserID: "alice", EventID: "b"}})
			return err
		})
	})
}

// A takeover of a lost job (TakeOverLostJobs) ends the job's claims on
// its turns (endClaims), which its update met in the table's order.
func TestReplayBesideTakeOverOfAJobClaimingDisorderedTurns(t *testing.T) {
	ctx, s := setup(t)
	var job int64
	if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, attempt, attempted_at, attempted_by)
		VALUES ('extract', '{}', 'q', 'running', 5, 1, now(), ARRAY['lost-proc']) RETURNING id`).Scan(&job); err != nil {
		t.Fatal(err)
	}
	// Each claimed alone, a first, so its row's new version lies first.
	disorderedTurns(t, ctx, s, func(ids []string) error {
		if ids[0] == "x" {
			return nil
		}
		_, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: job, UserID: "alice", Own: ids, Limit: 1, TTL: time.Hour})
		return err
	})
	replayBeside(t, s, func(ctx context.Context) error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			taken, err := q.TakeOverLostJobs(ctx, "lost-proc", []int64{job})
			if err == nil && len(taken) != 1 {
				err = fmt.Errorf("took over %v, want the job", taken)
			}
			return err
		})
	})
	var claimed int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE claimed_by IS NOT NULL`).Scan(&claimed); err != nil || claimed != 0 {
		t.Fatalf("%d turns claimed after the takeover (%v), want none", claimed, err)
	}
}

// A forget of the user deletes their turns (as its delete meets them)
// beside a burst's claim of them (ClaimConversationTurns), which the
// user's lock does not hold back.
func TestClaimBesideForgetOfDisorderedTurns(t *testing.T) {
	ctx, s := setup(t)
	disorderedTurns(t, ctx, s, func([]string) error { return nil })
	var claimed []store.Turn
	heldBeside(t, s, "claim", func(ctx context.Context) error {
		var err error
		claimed, err = s.ClaimConversationTurns(ctx, store.Claim{JobID: 1, UserID: "alice", Limit: 10, TTL: time.Hour})
		return err
	}, func(ctx context.Context) error {
		r, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		if err == nil && r.Turns != 3 {
			err = fmt.Errorf("forget deleted %d turns, want 3", r.Turns)
		}
		return err
	})
	if len(claimed) != 3 {
		t.Fatalf("claimed %d turns, want a, b and x", len(claimed))
	}
}

// A forget of the user beside the end of a job's claim (ReleaseClaims) on
// turns the job claimed, some of them processed with the claim left on
// them (as MarkProcessed of earlier releases left it): the release locks
// those too, in (turn_at, event_id) order, so the forget locks them in
// that order with the unprocessed ones. Locking the unprocessed turns
// alone, it held a, which the release waited for, and its delete waited
// for b, which the release held.
func TestReleaseBesideForgetOfDisorderedProcessedClaimedTurns(t *testing.T) {
	ctx, s := setup(t)
	const job = 7
	// Each claimed alone, a first, then b and x processed keeping the
	// claim, so the table holds a, b and x in that order.
	disorderedTurns(t, ctx, s, func(ids []string) error {
		_, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: job, UserID: "alice", Own: ids, Limit: 1, TTL: time.Hour})
		return err
	})
	for _, id := range []string{"b", "x"} {
		if _, err := s.Pool().Exec(ctx, `UPDATE turns SET status = 'processed', claimed_until = NULL WHERE user_id = 'alice' AND event_id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	heldBeside(t, s, "release", func(ctx context.Context) error {
		return s.ReleaseClaims(ctx, job, "alice", []string{"a", "b", "x"})
	}, func(ctx context.Context) error {
		r, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		if err == nil && r.Turns != 3 {
			err = fmt.Errorf("forget deleted %d turns, want 3", r.Turns)
		}
		return err
	})
}

// disorderedTurns records alice's turns a, b and x, of event id order a, b
// and time order b, x, a (a first in the table and as received), and sets
// them processed or failed with settle.
func disorderedTurns(t *testing.T, ctx context.Context, s *store.Store, settle func(ids []string) error) {
	t.Helper()
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "a", UserID: "alice", UserMessage: "Gate 9", TurnAt: past.Add(2 * time.Hour)},
		{EventID: "b", UserID: "alice", UserMessage: "In Paris", TurnAt: past},
		{EventID: "x", UserID: "alice", UserMessage: "Still Paris", TurnAt: past.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	// One at a time, a first: an update writes a row's new version after
	// the rows before it, so a's row stays ahead of b's in the table.
	for _, id := range []string{"a", "b", "x"} {
		if err := settle([]string{id}); err != nil {
			t.Fatal(err)
		}
	}
}

// replayBeside runs a replay of alice's turns a, b and x (RequeueTurns)
// and write beside each other (see heldBeside) and fails the test unless
// both succeed and the replay set a and b pending (a writer waiting for
// it leaves them so).
func replayBeside(t *testing.T, s *store.Store, write func(context.Context) error) {
	t.Helper()
	ctx := context.Background()
	var replayed []store.Turn
	for _, id := range []string{"a", "b", "x"} {
		turn, err := s.GetTurn(ctx, "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		replayed = append(replayed, turn)
	}
	heldBeside(t, s, "replay", func(ctx context.Context) error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.RequeueTurns(ctx, replayed, time.Time{})
			return err
		})
	}, write)
	for _, id := range []string{"a", "b"} {
		if turn, err := s.GetTurn(ctx, "alice", id); err != nil || turn.Status != store.StatusPending {
			t.Fatalf("turn %s after the replay: %q (%v), want pending", id, turn.Status, err)
		}
	}
}

// heldBeside runs first, which locks alice's turns b, x and a in that
// (time) order, and write beside each other, in the order that closes a
// cycle when write locks a and b in another order (see the top of this
// file), and fails the test unless both succeed.
func heldBeside(t *testing.T, s *store.Store, name string, first, write func(context.Context) error) {
	t.Helper()
	ctx := context.Background()
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM turns WHERE user_id = 'alice' AND event_id = 'x' FOR KEY SHARE`); err != nil {
		t.Fatal(err)
	}
	waiter, firstDone := waitingOn(t, s, holder, "the "+name, "the held turn", func() error { return first(ctx) })
	_, written := waitingOn(t, s, waiter, "the writer", "the "+name, func() error { return write(ctx) })
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, werr := <-firstDone, <-written; ferr != nil || werr != nil {
		t.Fatalf("%s: %v; writer: %v; want both done", name, ferr, werr)
	}
}
