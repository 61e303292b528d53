package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestRequeueLocksInTheSaveOrder: an extraction's save locks a user's turns
// in (turn_at, event_id) order; replay's requeue used to lock them in (user,
// id) order through its upsert, so a save holding the earliest turn and a
// replay holding a later one deadlocked (40P01), which a review reproduced
// with 3,000 turns. Here the save side holds the earliest turn ("z", whose
// id sorts last); the requeue must wait for it holding nothing, so that the
// save can then lock the later turn ("a") and finish.
func TestRequeueLocksInTheSaveOrder(t *testing.T) {
	lockOrderCase(t, func(ctx context.Context, q *store.Store, turns []store.Turn) error {
		_, err := q.RequeueTurns(ctx, turns, time.Time{})
		return err
	})
}

// TestMarkFailedLocksInTheSaveOrder: recording a job's failure over several
// turns locks them in the order saves and claims do, so a final failure is
// never lost to a deadlock (its job would be cancelled with the turns still
// pending).
func TestMarkFailedLocksInTheSaveOrder(t *testing.T) {
	lockOrderCase(t, func(ctx context.Context, q *store.Store, turns []store.Turn) error {
		return q.MarkFailed(ctx, "alice", []string{"a", "z"}, "boom", true)
	})
}

// lockOrderCase holds the earliest of two turns the way a save does, runs op
// over both in a transaction, and checks that op waits for it holding
// nothing: the holder can then lock the later turn.
func lockOrderCase(t *testing.T, op func(ctx context.Context, q *store.Store, turns []store.Turn) error) {
	t.Helper()
	ctx, s := setup(t)
	turns := []store.Turn{
		{EventID: "z", UserID: "alice", UserMessage: "first", TurnAt: t0},
		{EventID: "a", UserID: "alice", UserMessage: "second", TurnAt: t0.Add(time.Minute)},
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	save, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = save.Rollback(ctx) }()
	var xid int64
	if err := save.QueryRow(ctx, `SELECT txid_current() % 4294967296`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if _, err := save.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' AND event_id = 'z' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			// The other order first: the update alone would lock "a" first.
			return op(ctx, q, turns)
		})
	}()
	// Wait until the requeue waits for the save's transaction.
	eventstest.Eventually(t, "the operation to wait for the locked turn", 30*time.Second, func() (bool, string) {
		var waiting bool
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text::bigint = $1)`, xid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting, "no wait on the save's transaction"
	})
	// The save goes on to the later turn: it must not wait for the requeue.
	if _, err := save.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := save.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' AND event_id = 'a' FOR UPDATE`); err != nil {
		t.Fatalf("the save could not lock its later turn while the operation waited: %v", err)
	}
	if err := save.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("op: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the operation did not finish after the save committed")
	}
}
