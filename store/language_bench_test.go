package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// BenchmarkRecallEnglish is one recall (facts and candidates in one
// statement) of an English user with 2,000 items, 3 keywords matching 41
// of them: what the
// per-user configuration lookup and the CJK rewrite of the query (migration
// 020) add to every enrich. Compare with the same benchmark on a tree
// before migration 020.
func BenchmarkRecallEnglish(b *testing.B) {
	ctx := context.Background()
	s := storetest.New(b)
	items := make([]store.ContextWrite, 2000)
	for i := range items {
		items[i] = store.ContextWrite{UserID: "u", CreatedAt: t0,
			Question: fmt.Sprintf("What did I say about the trip number %d to city%d and the dinner?", i, i%50),
			Answer:   fmt.Sprintf("You said the trip %d was great and the food in city%d was excellent", i, i%50)}
	}
	if _, err := s.InsertContext(ctx, items); err != nil {
		b.Fatal(err)
	}
	q := store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: []string{"city7", "1234", "lunch"}}, MaxFacts: 50}
	for b.Loop() {
		if _, c, err := s.Recall(ctx, q); err != nil || len(c.Matches) != 41 {
			b.Fatalf("%d matches, %v", len(c.Matches), err)
		}
	}
}
