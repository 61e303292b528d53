package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkDirectWrites: one facts.set and one store (each its own
// transaction), the writes whose cost the change triggers add to. Compare
// with the same benchmark before migration 024 for the triggers' cost.
func BenchmarkDirectWrites(b *testing.B) {
	ctx, s := context.Background(), storetest.New(b)
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := s.SetFact(ctx, "alice", "name", fmt.Sprintf("Alice %d", i)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: fmt.Sprintf("a %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChangeUsers: one page (100 users) of the users with changes
// waiting, with 100k changes waiting over 1, 1000 and 100k users (a replay
// writes a change per row it rebuilds). Each iteration runs the GROUP BY
// the publisher used before (a scan of the whole outbox) and
// store.ChangeUsers (an index probe per user returned), alternated, and
// reports the mean of each in microseconds.
func BenchmarkChangeUsers(b *testing.B) {
	const pending, page = 100_000, 100
	for _, users := range []int{1, 1000, pending} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			ctx, s := context.Background(), storetest.New(b)
			// One transaction: numbered at its commit, like a replay's
			// writes (the deferred trigger numbers them all at once).
			if _, err := s.Pool().Exec(ctx, `INSERT INTO memory_changes (user_id, payload)
				SELECT 'user' || lpad((g % $1)::text, 6, '0'), '{"type":"fact.set","key":"k","value":"v"}'
				FROM generate_series(1, $2) g`, users, pending); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Pool().Exec(ctx, `ANALYZE memory_changes`); err != nil {
				b.Fatal(err)
			}
			var old, loose time.Duration
			b.ResetTimer()
			for range b.N {
				t := time.Now()
				rows, err := s.Pool().Query(ctx, `SELECT user_id FROM memory_changes WHERE seq IS NOT NULL
					GROUP BY user_id ORDER BY min(id) LIMIT $1`, page)
				if err != nil {
					b.Fatal(err)
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil || len(got) != min(users, page) {
					b.Fatalf("group by: %d users, %v", len(got), err)
				}
				old += time.Since(t)
				t = time.Now()
				got, err = s.ChangeUsers(ctx, "", page)
				if err != nil || len(got) != min(users, page) {
					b.Fatalf("change users: %d users, %v", len(got), err)
				}
				loose += time.Since(t)
			}
			b.ReportMetric(float64(old.Microseconds())/float64(b.N), "groupby_us")
			b.ReportMetric(float64(loose.Microseconds())/float64(b.N), "loose_us")
		})
	}
}
