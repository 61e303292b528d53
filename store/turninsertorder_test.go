package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// Ingest (InsertTurns, a batch in stream order) and a replay (RequeueTurns)
// may record the same new turns at once: a replay reads the stream while
// live ingest still works through it, and both take the users' forget lock
// shared only. An insert of a new key waits on the unique index for another
// transaction's uncommitted insert of it, so two transactions inserting the
// same new keys in different orders each waited for the other's and
// Postgres failed one (40P01): ingest's whole batch logged as an ERROR and
// handed back, or a replay batch run again. The same holds for a recorded
// turn the replay sets back to pending: ingest's insert waits for that
// uncommitted update too. Both write in the index's (user_id, event_id)
// order.
//
// Each case forces that interleaving: the replay's batch holds a third key
// between the two in that order, which a third transaction has inserted
// and not committed, so the replay inserts the lower key and waits; ingest
// is started with the two keys in stream order, the higher first, and runs
// until it waits for the replay; then the third transaction rolls back.
// Both must succeed, and ingest find the replay's turns the same as its
// own (duplicates).
func TestIngestBesideReplayOfTheSameNewTurns(t *testing.T) {
	for _, c := range []struct {
		name         string
		lo, held, hi store.TurnKey
		// loProcessed records lo processed first: the replay sets it back
		// to pending, and ingest's insert waits for that update as for an
		// insert.
		loProcessed bool
	}{
		// Stream order b, a; the replay's a, a5, b.
		{name: "one user", lo: store.TurnKey{UserID: "alice", EventID: "a"}, held: store.TurnKey{UserID: "alice", EventID: "a5"},
			hi: store.TurnKey{UserID: "alice", EventID: "b"}},
		// Event id order is the stream's here (a, b): only the user, first
		// in the key, puts alice's b before bob's a.
		{name: "two users", lo: store.TurnKey{UserID: "alice", EventID: "b"}, held: store.TurnKey{UserID: "alice", EventID: "z"},
			hi: store.TurnKey{UserID: "bob", EventID: "a"}},
		{name: "a recorded turn", lo: store.TurnKey{UserID: "alice", EventID: "a"}, held: store.TurnKey{UserID: "alice", EventID: "a5"},
			hi: store.TurnKey{UserID: "alice", EventID: "b"}, loProcessed: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, s := setup(t)
			turn := func(k store.TurnKey, seq uint64) store.Turn {
				return store.Turn{EventID: k.EventID, UserID: k.UserID, ConversationID: "c", UserMessage: "turn " + k.EventID,
					TurnAt: past.Add(time.Duration(seq) * time.Minute), Placed: store.StreamPosition{Seq: seq, Stored: past}}
			}
			// In the stream: hi (1), lo (2), held (3).
			hi, lo, held := turn(c.hi, 1), turn(c.lo, 2), turn(c.held, 3)
			users := []string{c.lo.UserID, c.hi.UserID}
			if c.loProcessed {
				if _, err := s.InsertTurns(ctx, []store.Turn{lo}); err != nil {
					t.Fatal(err)
				}
				if err := s.MarkProcessed(ctx, c.lo.UserID, []string{c.lo.EventID}, store.Provenance{Extractor: "rules"}); err != nil {
					t.Fatal(err)
				}
			}

			hold, holder := begin(t, s)
			if _, err := s.WithTx(hold).InsertTurns(ctx, []store.Turn{held}); err != nil {
				t.Fatal(err)
			}
			replay, replayed := waitingOn(t, s, holder, "the replay", "the held turn", func() error {
				return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
					if _, err := q.LockUsers(ctx, users); err != nil {
						return err
					}
					_, err := q.RequeueTurns(ctx, []store.Turn{hi, lo, held}, time.Time{})
					return err
				})
			})
			var outcomes []store.TurnOutcome
			_, ingested := waitingOn(t, s, replay, "ingest", "the replay", func() error {
				return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
					if _, busy, err := q.TryLockUsers(ctx, users); err != nil || len(busy) > 0 {
						return fmt.Errorf("lock users: busy %v, %w", busy, err)
					}
					var err error
					outcomes, err = q.InsertTurns(ctx, []store.Turn{hi, lo})
					return err
				})
			})
			if err := hold.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if rerr, ierr := <-replayed, <-ingested; rerr != nil || ierr != nil {
				t.Fatalf("replay: %v; ingest: %v; want both done", rerr, ierr)
			}
			if want := []store.TurnOutcome{store.TurnDuplicate, store.TurnDuplicate}; !slices.Equal(outcomes, want) {
				t.Fatalf("ingest's outcomes %v, want %v (the replay's turns)", outcomes, want)
			}
			for _, want := range []store.Turn{hi, lo, held} {
				got, err := s.GetTurn(ctx, want.UserID, want.EventID)
				if err != nil || got.Placed.Seq != want.Placed.Seq || got.Status != store.StatusPending {
					t.Fatalf("turn %v: seq %d, %q (%v), want seq %d pending", want.Key(), got.Placed.Seq, got.Status, err, want.Placed.Seq)
				}
			}
		})
	}
}
