package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestChangesResyncWalkConvergesWhenAPairIsSaidAgain follows protocol.md's
// resync for a cache kept from memory.changes: walk context.list page by
// page, then apply the changes committed from the walk's start on. An
// item said again during the walk (a store of a pair the user already has)
// moves to the front, behind the walk's cursor, and is not listed (as
// context.list documents); for the cache to converge, the move must then
// come as a change. It came as none: the item was missing from the cache
// for good.
func TestChangesResyncWalkConvergesWhenAPairIsSaidAgain(t *testing.T) {
	ctx, s := setup(t)
	const user = "walker"
	var writes []store.ContextWrite
	for i := 0; i < 5; i++ {
		writes = append(writes, store.ContextWrite{UserID: user, Question: fmt.Sprintf("q%d", i), Answer: "a",
			CreatedAt: t0.Add(time.Duration(i) * time.Minute), EventID: fmt.Sprintf("e%d", i)})
	}
	if _, err := s.InsertContext(ctx, writes); err != nil {
		t.Fatal(err)
	}
	drain(ctx, t, s, user) // the cache started before: these were applied

	// The resync: a walk of pages of 2, newest first.
	cache := map[int64]bool{}
	page, err := s.ListContext(ctx, user, store.ContextCursor{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range page {
		cache[it.ID] = true
	}
	// Mid-walk, the oldest pair is said again (an agent's store_memory).
	oldest, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: user, Question: "q0", Answer: "a"})
	if err != nil {
		t.Fatal(err)
	}
	for len(page) == 2 {
		last := page[len(page)-1]
		if page, err = s.ListContext(ctx, user, store.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID}, 2); err != nil {
			t.Fatal(err)
		}
		for _, it := range page {
			cache[it.ID] = true
		}
	}
	// Then the changes committed since the walk began.
	for _, c := range drain(ctx, t, s, user) {
		switch c.Type {
		case "context.stored", "context.updated":
			cache[c.ID] = true
		case "context.deleted":
			delete(cache, c.ID)
		}
	}
	all, err := s.ListContext(ctx, user, store.ContextCursor{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range all {
		if !cache[it.ID] {
			t.Errorf("item %d (%q), said again during the resync walk, is in context.list but not in the cache: neither the walk listed it nor a change announced it", it.ID, it.Question)
		}
	}
	if len(cache) != len(all) || !cache[oldest] {
		t.Errorf("cache holds %d items, context.list %d", len(cache), len(all))
	}
}
