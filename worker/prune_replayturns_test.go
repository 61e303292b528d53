package worker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// A replay without --reset rewrites every turn row it reads (set back to
// pending with its text, then processed): the turns table's files grow by
// the dead row versions, which a VACUUM makes reusable but never gives
// back. They are no memory, yet the turns table counted at its real size
// (less cleared text), so the floor grew and the prune after the replay
// deleted context that had fit under the same limit before it (a prune
// walk: 29 of 30 users lost every context item, 319 items, after a
// `replay --no-work` under --max-db-size 7M: floor 4.26 MB to 5.95 MB).
// The turns table now counts by its rows over the most row versions it
// held (migration 062): seen dead by the prune's own measure, or, once a
// VACUUM (autovacuum's) reclaimed them, by the sample the reconcile job
// takes every minute. Each case has a database of its own: in the shared
// one, another test's transaction older than the rewrites keeps the dead
// rows through the VACUUM.
func TestPruneCountsNoReplayedTurnVersionsAsMemory(t *testing.T) {
	for _, vacuumed := range []bool{false, true} {
		t.Run(fmt.Sprintf("vacuumed=%v", vacuumed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := storetest.Open(t, storetest.Database(t))
			noAutovacuum(t, s)
			seedContext(t, s, []string{"alice", "bob"}, 300)
			var turns []store.Turn
			for i := range 1500 {
				turns = append(turns, store.Turn{EventID: fmt.Sprintf("t-%d", i), UserID: "carol", UserMessage: strings.Repeat("I like my garden. ", 25),
					AssistantResponse: strings.Repeat("That sounds lovely. ", 15), TurnAt: t0.Add(time.Duration(i) * time.Minute)})
			}
			if _, err := s.InsertTurns(ctx, turns); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Pool().Exec(ctx, `UPDATE turns SET status = 'processed', processed_at = now()`); err != nil {
				t.Fatal(err)
			}
			// The UPDATE's dead rows reach the statistics up to a second
			// after it: a VACUUM before that sets the count to 0 and the
			// late 1,500 are then counted dead until the next one.
			waitStat(t, s, "the update's dead turns", `SELECT pg_stat_get_dead_tuples('turns'::regclass) >= 1500`)
			if _, err := s.Pool().Exec(ctx, `VACUUM turns, context, context_terms`); err != nil {
				t.Fatal(err)
			}
			vacuumUntilNoDead(t, s, "turns")
			before, err := s.MeasureSize(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// The memory fits, with 5% of its context to spare.
			limit := before.LiveBytes + before.ContextLiveBytes()/20
			// The replay's rewrites of the turn rows: pending, then processed.
			for _, q := range []string{`UPDATE turns SET status = 'pending', processed_at = NULL`, `UPDATE turns SET status = 'processed', processed_at = now()`} {
				if _, err := s.Pool().Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			// At least the first rewrite's: the second may prune some of them
			// from their pages as it goes (the statistics then count fewer).
			waitStat(t, s, "the replay's dead turn versions", `SELECT pg_stat_get_dead_tuples('turns'::regclass) >= 1500`)
			if vacuumed {
				if err := s.SampleContextHighWater(ctx); err != nil { // the reconcile job's
					t.Fatal(err)
				}
				vacuumUntilNoDead(t, s, "turns") // autovacuum's
			}
			rep, err := worker.Prune(ctx, s, worker.PruneLimits{MaxBytes: limit})
			if err != nil {
				t.Fatal(err)
			}
			if rep.RemovedForSize != 0 || rep.TurnTextsClearedForSize != 0 {
				t.Fatalf("a replay that changed no memory cost %d of 600 context items and %d turns' text under a limit the same memory fit under before it (floor %d -> %d, turns table %d -> %d bytes, live %d -> %d, limit %d)",
					rep.RemovedForSize, rep.TurnTextsClearedForSize, before.FloorBytes, rep.Before.FloorBytes, before.TurnsBytes, rep.Before.TurnsBytes, before.LiveBytes, rep.Before.LiveBytes, limit)
			}
			if rep.Before.TurnsBytes <= before.TurnsBytes {
				t.Fatalf("the rewrites did not grow the turns table (%d -> %d bytes): the test shows nothing", before.TurnsBytes, rep.Before.TurnsBytes)
			}
		})
	}
}
