package store_test

import (
	"context"
	"fmt"
	"testing"

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
