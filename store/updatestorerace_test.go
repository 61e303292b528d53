package store_test

import (
	"errors"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestUpdateToAPairStoredMeanwhileIsADuplicate: a context.update to the
// pair a store of the user's was inserting at the same time (not yet
// committed when the update looked for a duplicate) failed on the unique
// index (23505), a 500 "memory store unavailable", where the same update
// a moment later is a 409 naming the stored item. It is that 409 now, and
// changes nothing.
func TestUpdateToAPairStoredMeanwhileIsADuplicate(t *testing.T) {
	ctx, s := setup(t)
	direct := store.Provenance{Extractor: "direct"}
	x, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: "Which gate?", Answer: "Gate 9", Provenance: direct})
	if err != nil {
		t.Fatal(err)
	}
	held := holdStatements(t, s, "INSERT", "context")
	type stored struct {
		id  int64
		err error
	}
	storeDone := make(chan stored, 1)
	go func() {
		id, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ivan", Question: "Which gate?", Answer: "Gate 12", Provenance: direct})
		storeDone <- stored{id, err}
	}()
	held.waits("the store to be held after its insert")
	answer := "Gate 12"
	updated := make(chan error, 1)
	go func() {
		_, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "ivan", ID: x, Answer: &answer})
		updated <- err
	}()
	waitBlockedBy(t, s, held, "the update to wait for the store")
	held.release()
	st := <-storeDone
	if st.err != nil {
		t.Fatal(st.err)
	}
	err = <-updated
	var dup *store.DuplicateError
	if !errors.As(err, &dup) || dup.ID != st.id {
		t.Fatalf("update to the pair stored meanwhile: %v; want a duplicate of item %d", err, st.id)
	}
	if it, err := s.ContextByID(ctx, "ivan", x); err != nil || it.Answer != "Gate 9" {
		t.Errorf("item after the refused update: %+v, %v; want it unchanged", it, err)
	}
}
