package store_test

import (
	"bytes"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestClearOfAnImportedItemSparesTheUsersOwnTurn: event ids are unique per
// user only, so an item dave imported from bob's export may carry the id
// of one of dave's own turns ("e1": two frontends counting from 1). A
// clear (or correction) of the imported item covers what the import
// brought, not dave's own turn e1: its memory, extracted after the clear
// (a turn still pending, a replay by another model), is kept. Before, the
// clear recorded dave's e1 as cleared and dave's own memory of it was
// dropped (an identity walk: a user's memory moved to another id with
// export and import, one imported item deleted).
func TestClearOfAnImportedItemSparesTheUsersOwnTurn(t *testing.T) {
	for _, how := range []string{"delete", "update"} {
		t.Run(how, func(t *testing.T) {
			ctx, s := setup(t)
			if _, err := s.InsertTurns(ctx, []store.Turn{
				{EventID: "e1", UserID: "bob", UserMessage: "Which gate?", TurnAt: t0},
				{EventID: "e1", UserID: "dave", UserMessage: "What is my wifi password?", TurnAt: t0},
			}); err != nil {
				t.Fatal(err)
			}
			rules := store.Provenance{Extractor: "rules"}
			if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "bob", Question: "Which gate?", Answer: "Gate 9", EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
				t.Fatal(err)
			}
			var exp bytes.Buffer
			if err := s.Export(ctx, "bob", &exp); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Import(ctx, "dave", "dave", &exp); err != nil {
				t.Fatal(err)
			}
			items, err := s.ListContext(ctx, "dave", store.ContextCursor{}, 10)
			if err != nil || len(items) != 1 {
				t.Fatalf("dave's items after the import: %+v, %v; want the imported one", items, err)
			}
			id := items[0].ID
			switch how {
			case "delete":
				if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "dave", ID: id}); err != nil {
					t.Fatal(err)
				}
			case "update":
				a := "Gate 10"
				if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "dave", ID: id, Answer: &a}); err != nil {
					t.Fatal(err)
				}
			}
			// dave's own e1, extracted now (it was pending).
			ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "dave", Question: "What is my wifi password?", Answer: "hunter2", EventID: "e1", CreatedAt: t0, Provenance: rules}})
			if err != nil {
				t.Fatal(err)
			}
			if ids[0] == 0 {
				t.Errorf("dave's own turn e1 was not stored after a %s of the item imported from bob's e1: the clear covered dave's own turn", how)
			}
		})
	}
}
