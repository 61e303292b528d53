package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestRetriedClearDeletesANewerWrite pins what protocol.md says of a clear
// sent again (a requester that timed out): a clear carries no request id,
// so its retry is a clear of its own, dated when it arrives, and deletes
// what was written between the two (here a facts.set answered in
// between, and a store of the pair a question clear covers). A client
// that retries a clear re-reads first, or retries only what it has not
// written over since.
func TestRetriedClearDeletesANewerWrite(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.SetFact(ctx, "mia", "location", "Oslo"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteFact(ctx, "mia", "location"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetFact(ctx, "mia", "location", "Rome"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteFact(ctx, "mia", "location"); err != nil || n != 1 {
		t.Fatalf("the clear sent again: deleted %d, %v; want the newer Rome deleted, as documented", n, err)
	}
	q := "Where do I live?"
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "mia", Question: q}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "mia", Question: q, Answer: "Rome",
		Provenance: store.Provenance{Extractor: "direct"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "mia", Question: q}); err != nil || n != 1 {
		t.Fatalf("the question clear sent again: deleted %d, %v; want the newer pair deleted, as documented", n, err)
	}
}
