package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestPruneKeepsItemDeduplicatedAfterChoice: an item the prune chose (the
// oldest, or beyond the per-user cap) and that a store or an insert then
// deduplicated against, committing before the prune deletes, is kept: its
// created_at moved to the newer time, so it is no longer what the prune
// chose. (The prune chooses from a snapshot; the hook runs the store in the
// window between that snapshot and the delete.)
func TestPruneKeepsItemDeduplicatedAfterChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		prune func(ctx context.Context, s *store.Store) (int64, error)
		again func(ctx context.Context, s *store.Store, w store.ContextWrite) error
	}{
		{"oldest, store", func(ctx context.Context, s *store.Store) (int64, error) { return s.DeleteOldestContext(ctx, 1) },
			func(ctx context.Context, s *store.Store, w store.ContextWrite) error {
				w.CreatedAt = time.Time{} // now, as memory.store does
				_, inserted, err := s.StoreContext(ctx, w)
				if err == nil && inserted {
					err = fmt.Errorf("stored anew, want deduplicated")
				}
				return err
			}},
		{"over cap, insert", func(ctx context.Context, s *store.Store) (int64, error) { return s.DeleteContextOverCap(ctx, 5, 100) },
			func(ctx context.Context, s *store.Store, w store.ContextWrite) error {
				w.CreatedAt = t0.Add(time.Hour) // a later turn saying it again
				ids, err := s.InsertContext(ctx, []store.ContextWrite{w})
				if err == nil && ids[0] != 0 {
					err = fmt.Errorf("inserted anew (id %d), want deduplicated", ids[0])
				}
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := setup(t)
			var items []store.ContextWrite
			for i := range 6 {
				items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question %d", i), Answer: "answer",
					CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
			}
			ids, err := s.InsertContext(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			oldest := ids[0]
			hooked := 0
			pruneCtx := store.WithPruneChosenHook(ctx, func() {
				hooked++
				if err := tc.again(ctx, s, items[0]); err != nil {
					t.Errorf("saying the oldest pair again: %v", err)
				}
			})
			n, err := tc.prune(pruneCtx, s)
			if err != nil {
				t.Fatal(err)
			}
			if hooked != 1 {
				t.Fatalf("hook ran %d times, want 1", hooked)
			}
			if n != 0 {
				t.Errorf("prune deleted %d items, want 0 (its choice was said again meanwhile)", n)
			}
			recent, err := s.RecentContext(ctx, "alice", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(recent) != 6 || recent[0].ID != oldest {
				t.Fatalf("after the prune: %d items, newest %+v; want all 6, the pair said again (id %d) newest", len(recent), recent[0], oldest)
			}
			// The next run prunes what is now the oldest.
			if n, err := tc.prune(ctx, s); err != nil || n != 1 {
				t.Fatalf("next prune: %d, %v; want 1 deleted", n, err)
			}
			if recent, err = s.RecentContext(ctx, "alice", 10); err != nil {
				t.Fatal(err)
			}
			for _, it := range recent {
				if it.Question == "question 1" {
					t.Errorf("next prune kept %q, the oldest left", it.Question)
				}
			}
		})
	}
}
