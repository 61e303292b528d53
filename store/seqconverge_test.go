package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestFactWritesWithSeqsConvergeInAnyOrder: TestFactWritesConvergeInAnyOrder
// with every turn given a place in the stream that orders the turns against
// their event ids (the same-time ties there: city, pets, car).
func TestFactWritesWithSeqsConvergeInAnyOrder(t *testing.T) {
	ctx, s := setup(t)
	writes := permutationWrites()
	var events []string
	for _, w := range writes {
		if !slices.Contains(events, w.EventID) {
			events = append(events, w.EventID)
		}
	}
	slices.SortFunc(events, func(a, b string) int { return -strings.Compare(a, b) })
	for i := range writes {
		if writes[i].Extractor != "direct" {
			writes[i].Placed = store.StreamPosition{Seq: uint64(1 + slices.Index(events, writes[i].EventID))}
		}
	}
	apply := func(prefix string, calls [][]store.FactWrite) string {
		t.Helper()
		for _, call := range calls {
			renamed := slices.Clone(call)
			for i := range renamed {
				renamed[i].UserID = prefix + renamed[i].UserID
			}
			if _, err := s.UpsertFacts(ctx, renamed); err != nil {
				t.Fatal(err)
			}
		}
		return factRows(t, ctx, s, prefix+"alice") + "bob:\n" + factRows(t, ctx, s, prefix+"bob")
	}
	one := make([][]store.FactWrite, len(writes))
	for i, w := range writes {
		one[i] = []store.FactWrite{w}
	}
	want := apply("ref/", one)
	rng := rand.New(rand.NewPCG(7, 3))
	for round := range 60 {
		perm := slices.Clone(writes)
		rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		var calls [][]store.FactWrite
		for len(perm) > 0 {
			n := 1 + rng.IntN(min(len(perm), 8))
			calls, perm = append(calls, perm[:n]), perm[n:]
		}
		if got := apply(fmt.Sprintf("p%d/", round), calls); got != want {
			t.Fatalf("round %d (%d calls): facts\n%s\nwant\n%s", round, len(calls), got, want)
		}
	}
}
