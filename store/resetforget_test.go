package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestForgetBesideAResetOfEveryUserLeavesNothing: a forget of a user
// beside a reset of every user (which copies each user's direct clears
// back into fact_clears) leaves nothing of the user, whichever starts
// first.
//
// With the reset first, the forget's delete of the user's fact_clears
// waited for the rows the reset had deleted and, its snapshot taken before
// the reset committed, did not see the copies the reset had inserted: the
// forgotten user's cleared keys stayed in fact_clears. Now a forget takes
// the reset lock shared, after the user's lock.
func TestForgetBesideAResetOfEveryUserLeavesNothing(t *testing.T) {
	for _, forgetFirst := range []bool{true, false} {
		name := "reset_first"
		if forgetFirst {
			name = "forget_first"
		}
		t.Run(name, func(t *testing.T) {
			ctx, s := setup(t)
			rules := store.Provenance{Extractor: "rules"}
			if _, err := s.InsertTurns(ctx, []store.Turn{
				{EventID: "e1", UserID: "dave", UserMessage: "I live in Paris", TurnAt: t0},
				{EventID: "e2", UserID: "dave", UserMessage: "My name is Dave", TurnAt: t0},
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{
				{UserID: "dave", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1", Provenance: rules},
				{UserID: "dave", Key: "name", Value: "Dave", SourceAt: t0, EventID: "e2", Provenance: rules},
			}); err != nil {
				t.Fatal(err)
			}
			// A direct clear: in fact_clears and fact_direct_clears, which
			// the reset copies back into fact_clears.
			if _, err := s.DeleteFact(ctx, "dave", "location"); err != nil {
				t.Fatal(err)
			}
			forgot := make(chan error, 1)
			startForget := func() {
				go func() {
					_, _, err := s.ForgetUser(ctx, "dave", "dave", store.StreamPosition{}, store.RiverJobs{})
					forgot <- err
				}()
			}
			startReset, reset := resetAll(ctx, s)
			// The first is held before it commits (a forget's last write
			// is its change, a reset's its mark, after the copy of the
			// direct clears); the second starts and waits for it.
			if forgetFirst {
				holdFirst(t, s, "INSERT", "memory_changes", startForget, startReset, "the forget", "the reset")
			} else {
				holdFirst(t, s, "INSERT", "replay_resets", startReset, startForget, "the reset", "the forget")
			}
			if ferr, rr := <-forgot, <-reset; ferr != nil || rr.err != nil {
				t.Fatalf("forget: %v; reset: %v; want both done", ferr, rr.err)
			}
			for _, table := range []string{"facts", "fact_clears", "fact_direct_clears", "context"} {
				var n int
				if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE user_id = 'dave'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 0 {
					t.Errorf("%d rows of the forgotten dave in %s, want none", n, table)
				}
			}
		})
	}
}

// TestResetOfAUserBesideAResetOfEveryUser: a reset of named users beside a
// reset of every user both succeed, whichever starts first. Before, with
// the reset of every user first, the named reset's delete of the user's
// fact_clears waited for the rows the other had deleted, missed the
// copies of the direct clears it had inserted, and its own copy then
// failed on them (a duplicate key, 23505). Now a reset of named users
// takes the reset lock shared.
func TestResetOfAUserBesideAResetOfEveryUser(t *testing.T) {
	for _, namedFirst := range []bool{true, false} {
		name := "all_first"
		if namedFirst {
			name = "named_first"
		}
		t.Run(name, func(t *testing.T) {
			ctx, s := setup(t)
			rules := store.Provenance{Extractor: "rules"}
			if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "dave", UserMessage: "I live in Paris", TurnAt: t0}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "dave", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1", Provenance: rules}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.DeleteFact(ctx, "dave", "location"); err != nil {
				t.Fatal(err)
			}
			start := func(users []string, done chan<- error) func() {
				return func() {
					go func() {
						_, _, err := s.ResetMemory(ctx, users)
						done <- err
					}()
				}
			}
			// The first is held at its mark, after its copy of the direct
			// clears; the second starts and waits for it.
			firstDone, secondDone := make(chan error, 1), make(chan error, 1)
			first, second := []string(nil), []string{"dave"}
			if namedFirst {
				first, second = second, first
			}
			holdFirst(t, s, "INSERT", "replay_resets", start(first, firstDone), start(second, secondDone), "the first reset", "the second reset")
			if err1, err2 := <-firstDone, <-secondDone; err1 != nil || err2 != nil {
				t.Fatalf("first reset: %v; second: %v; want both done", err1, err2)
			}
			checkClear(t, ctx, s, "location", t0)
		})
	}
}
