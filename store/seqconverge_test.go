package store_test

import (
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
	checkConvergence(t, ctx, s, writes, rand.New(rand.NewPCG(7, 3)), 60)
}
