package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestClearBesideAResetOfEveryUserKeepsWhatItRecorded: the user's own
// clears and corrections record what a reset must keep or carry over (a
// context clear by id or question, and an update, the keys of the cleared
// pair's turn, by which a reset keeps that turn's other items: no replay
// brings them back; facts.clear and facts.set of a list key, a clear of
// direct writes, which a reset copies into the clears a replay obeys),
// beside a reset of every user (replay --reset with no users, which takes
// no per-user lock). Whichever starts first, both succeed and the outcome
// is one of the two orders'.
//
// With the clear first, the reset's context delete took its snapshot
// before the clear committed, waited for the item the clear deleted, and
// checked the turn's other item against that snapshot, where the clear of
// its turn was not: it deleted the item. With the reset first, a direct
// clear of a fact committed between the reset's delete of the clears and
// its copy of the direct ones: the copy met the clear's own row and the
// reset failed on the duplicate key. Now these writers take the reset lock
// shared, first, and the reset exclusively: the two never interleave.
func TestClearBesideAResetOfEveryUserKeepsWhatItRecorded(t *testing.T) {
	for _, c := range []struct {
		name string
		// hold is the writer's last write, held before it commits.
		hold  [2]string
		write func(ctx context.Context, s *store.Store, sd seeded) error
		// check judges the outcome, the writer committed first or not.
		check func(t *testing.T, ctx context.Context, s *store.Store, sd seeded, writerFirst bool, err error)
	}{{
		name: "context_clear_by_id",
		hold: [2]string{"INSERT", "context_clears"},
		write: func(ctx context.Context, s *store.Store, sd seeded) error {
			_, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "dave", ID: sd.a})
			return err
		},
		check: checkTurnSibling,
	}, {
		name: "context_clear_by_question",
		hold: [2]string{"INSERT", "context_clears"},
		write: func(ctx context.Context, s *store.Store, sd seeded) error {
			_, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "dave", Question: "which GATE?"})
			return err
		},
		check: checkTurnSibling,
	}, {
		name: "context_update",
		hold: [2]string{"INSERT", "context_clears"},
		write: func(ctx context.Context, s *store.Store, sd seeded) error {
			answer := "Gate 10"
			_, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "dave", ID: sd.a, Answer: &answer})
			return err
		},
		check: func(t *testing.T, ctx context.Context, s *store.Store, sd seeded, writerFirst bool, err error) {
			if !writerFirst {
				// The reset took the item first: nothing to update.
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("the update after the reset: %v, want not found (the reset deleted the item)", err)
				}
				checkTurnSibling(t, ctx, s, sd, writerFirst, nil)
				return
			}
			if err != nil {
				t.Fatalf("update: %v", err)
			}
			if it, err := s.ContextByID(ctx, "dave", sd.a); err != nil || it.Answer != "Gate 10" {
				t.Errorf("the updated item after the reset: %+v, %v; want it kept (a direct write)", it, err)
			}
			if _, err := s.ContextByID(ctx, "dave", sd.b); err != nil {
				t.Errorf("the turn's other item after the update and the reset: %v; want it kept (the update cleared its turn, no replay brings it back)", err)
			}
		},
	}, {
		name: "fact_clear",
		hold: [2]string{"INSERT", "fact_direct_clears"},
		write: func(ctx context.Context, s *store.Store, sd seeded) error {
			_, err := s.DeleteFact(ctx, "dave", "location")
			return err
		},
		check: func(t *testing.T, ctx context.Context, s *store.Store, sd seeded, writerFirst bool, err error) {
			if err != nil {
				t.Fatalf("facts.clear: %v", err)
			}
			if f, err := s.Fact(ctx, "dave", "location"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("dave's location after the clear and the reset: %+v, %v; want none", f, err)
			}
			checkClear(t, ctx, s, "location", t0)
		},
	}, {
		name: "list_set",
		hold: [2]string{"INSERT", "fact_items"},
		write: func(ctx context.Context, s *store.Store, sd seeded) error {
			_, stored, err := s.SetFactValues(ctx, "dave", "likes", []string{"go"})
			if err == nil && !stored {
				err = errors.New("not stored")
			}
			return err
		},
		check: func(t *testing.T, ctx context.Context, s *store.Store, sd seeded, writerFirst bool, err error) {
			if err != nil {
				t.Fatalf("facts.set of the list: %v", err)
			}
			if f, err := s.Fact(ctx, "dave", "likes"); err != nil || f.Value != "go" {
				t.Errorf("dave's likes after the set and the reset: %+v, %v; want go", f, err)
			}
			checkClear(t, ctx, s, "likes", t0)
		},
	}} {
		for _, writerFirst := range []bool{true, false} {
			name := c.name + "/reset_first"
			if writerFirst {
				name = c.name + "/writer_first"
			}
			t.Run(name, func(t *testing.T) {
				ctx, s := setup(t)
				rules := store.Provenance{Extractor: "rules"}
				// dave's turn e1 gave two context items, his location and
				// a list item; e3 his name, which the reset must take
				// whatever the writer did (the replay extracts it again).
				if _, err := s.InsertTurns(ctx, []store.Turn{
					{EventID: "e1", UserID: "dave", UserMessage: "Gate 9, boat at the lake; I live in Paris, I like chess", TurnAt: t0},
					{EventID: "e3", UserID: "dave", UserMessage: "My name is Dave", TurnAt: t0},
				}); err != nil {
					t.Fatal(err)
				}
				var sd seeded
				var err error
				if sd.a, _, err = s.StoreContext(ctx, store.ContextWrite{UserID: "dave", Question: "Which gate?", Answer: "Gate 9",
					EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
					t.Fatal(err)
				}
				if sd.b, _, err = s.StoreContext(ctx, store.ContextWrite{UserID: "dave", Question: "Where is the boat?", Answer: "At the lake",
					EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.UpsertFacts(ctx, daveExtracted(t0, rules)); err != nil {
					t.Fatal(err)
				}

				wrote := make(chan error, 1)
				startWriter := func() { go func() { wrote <- c.write(ctx, s, sd) }() }
				startReset, reset := resetAll(ctx, s)
				// The first is held: the writer once it has written its
				// clear, before it commits; the reset once it has deleted
				// the clears turns made, before it copies the direct ones.
				// The second starts and goes as far as it can: it waits for
				// the first, or (without the reset lock) commits before it,
				// and is then the one that went first. Then the first goes
				// on.
				var secondFirst bool
				if writerFirst {
					held := holdStatements(t, s, c.hold[0], c.hold[1])
					startWriter()
					held.waits("the writer to be held before it commits")
					startReset()
					secondFirst = waitBlockedByOrDone(t, s, held, func() bool { return len(reset) == 1 }, "the reset to wait for the writer")
					held.release()
				} else {
					held := holdStatements(t, s, "DELETE", "fact_clears")
					startReset()
					held.waits("the reset to be held")
					startWriter()
					secondFirst = waitBlockedByOrDone(t, s, held, func() bool { return len(wrote) == 1 }, "the writer to wait for the reset")
					held.release()
				}
				wentFirst := writerFirst != secondFirst // the writer committed first
				if secondFirst {
					t.Logf("the second did not wait for the first: the writer committed first: %v", wentFirst)
				}
				werr, rr := <-wrote, <-reset
				if rr.err != nil {
					t.Fatalf("reset: %v (writer: %v); want it done", rr.err, werr)
				}
				c.check(t, ctx, s, sd, wentFirst, werr)
				// The reset took what the writer did not cover.
				if f, err := s.Fact(ctx, "dave", "name"); err == nil {
					t.Errorf("dave's name after the reset: %+v; want it deleted (the replay extracts it again)", f)
				}
				if rr.removed.Facts == 0 {
					t.Errorf("the reset removed %+v; want dave's name at least", rr.removed)
				}
			})
		}
	}
}

// seeded are dave's context items of turn e1.
type seeded struct{ a, b int64 }

// checkTurnSibling: item a went (cleared, or taken by the reset), and
// item b, of the same turn, is kept when the clear committed first (its
// turn is cleared: no replay brings it back), gone otherwise (the replay
// extracts it again, the turn not cleared then).
func checkTurnSibling(t *testing.T, ctx context.Context, s *store.Store, sd seeded, writerFirst bool, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("clear: %v", err)
	}
	if it, err := s.ContextByID(ctx, "dave", sd.a); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the cleared item after the clear and the reset: %+v, %v; want it gone", it, err)
	}
	_, err = s.ContextByID(ctx, "dave", sd.b)
	switch {
	case writerFirst && err != nil:
		t.Errorf("the turn's uncleared item after the clear and the reset: %v; want it kept (the clear covers its turn, no replay brings it back)", err)
	case !writerFirst && !errors.Is(err, store.ErrNotFound):
		t.Errorf("the turn's other item after the reset and then the clear: %v; want it deleted by the reset (the replay extracts it again)", err)
	}
}

// checkClear: a clear of dave's key covering his turns of t0 holds after
// the reset, so that the replay does not bring back what the user cleared.
func checkClear(t *testing.T, ctx context.Context, s *store.Store, key string, at time.Time) {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_clears WHERE user_id = 'dave' AND key = $1 AND cleared_at >= $2`, key, at).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d clears of dave's %s cover his turns after the reset, want 1", n, key)
	}
}

// waitBlockedByOrDone waits until a backend waits for a lock the
// transaction held by h holds (as waitBlockedBy), or done reports that the
// one started beside it finished without waiting; it returns which.
func waitBlockedByOrDone(t *testing.T, s *store.Store, h *statementHold, done func() bool, what string) (finished bool) {
	t.Helper()
	eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
		if done() {
			finished = true
			return true, ""
		}
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity w, pg_locks l
			WHERE l.locktype = 'advisory' AND NOT l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = $1
			  AND l.pid = ANY(pg_blocking_pids(w.pid))`, h.key).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	return finished
}
