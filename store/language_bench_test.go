package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkRecallEnglish is one recall (facts and candidates in one
// statement) of an English user with 100 or 2,000 items, 3 keywords
// matching 3 or 41 of them: what the per-user configuration lookup of
// migration 020 adds to every enrich. Compare with the same benchmark on a
// tree before migration 020.
func BenchmarkRecallEnglish(b *testing.B) {
	for _, n := range []int{100, 2000} {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := storetest.New(b)
			items := make([]store.ContextWrite, n)
			for i := range items {
				items[i] = store.ContextWrite{UserID: "u", CreatedAt: t0,
					Question: fmt.Sprintf("What did I say about the trip number %d to city%d and the dinner?", i, i%50),
					Answer:   fmt.Sprintf("You said the trip %d was great and the food in city%d was excellent", i, i%50)}
			}
			if _, err := s.InsertContext(ctx, items); err != nil {
				b.Fatal(err)
			}
			q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: []string{"city7", "1234", "lunch"}}, MaxFacts: 50}
			want := n/50 + min(1, n/1235)
			for b.Loop() {
				if _, c, err := s.Recall(ctx, q); err != nil || len(c.Matches) != want {
					b.Fatalf("%d matches, want %d, %v", len(c.Matches), want, err)
				}
			}
		})
	}
}
