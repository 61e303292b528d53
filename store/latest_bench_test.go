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

// BenchmarkRecallLatest is one recall for a question about a time alone
// (SearchQuery.Latest 3) by a user with 10,000 items, one every 52
// minutes over a year: over a day (28 items) and over the whole year,
// whose ids and times are all read to spread the picks over it; and, as
// sub-benchmarks, a recall with keywords over the same ranges. The items
// are vacuumed, as autovacuum leaves them once settled.
func BenchmarkRecallLatest(b *testing.B) {
	ctx := context.Background()
	url := storetest.Migrated(b)
	s := storetest.Open(b, url)
	items := make([]store.ContextWrite, 10000)
	for i := range items {
		items[i] = store.ContextWrite{UserID: "u", CreatedAt: t0.Add(time.Duration(i) * 52 * time.Minute),
			Question: fmt.Sprintf("What did I say about the trip number %d to city%d and the dinner?", i, i%50),
			Answer:   fmt.Sprintf("You said the trip %d was great and the food in city%d was excellent", i, i%50)}
	}
	if _, err := s.InsertContext(ctx, items); err != nil {
		b.Fatal(err)
	}
	// As autovacuum leaves settled items: visible to index-only scans.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE context"); err != nil {
		b.Fatal(err)
	}
	for _, r := range []struct {
		name         string
		since, until time.Time
	}{
		{"day", t0.AddDate(0, 3, 0), t0.AddDate(0, 3, 1)},
		{"month", t0.AddDate(0, 3, 0), t0.AddDate(0, 4, 0)},
		{"year", t0, t0.AddDate(1, 0, 0)},
	} {
		// A question with keywords and a day: the whole memory's
		// candidates are aggregated (cand), and since a84c74f their
		// document frequencies counted, before the range narrows them.
		// "trip" and "dinner" are in every item: the worst case.
		for _, kw := range [][]string{{"trip", "dinner"}, {"city7"}} {
			b.Run(fmt.Sprintf("%s keywords %v", r.name, kw), func(b *testing.B) {
				q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: kw, Since: r.since, Until: r.until}, MaxFacts: 50}
				for b.Loop() {
					if _, _, err := s.Recall(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(r.name, func(b *testing.B) {
			q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Since: r.since, Until: r.until, Latest: 3}, MaxFacts: 50}
			for b.Loop() {
				if _, c, err := s.Recall(ctx, q); err != nil || len(c.Matches) != 3 {
					b.Fatalf("%d matches, %v", len(c.Matches), err)
				}
			}
		})
	}
}
