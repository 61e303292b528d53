package enricher_test

import (
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestVectorCacheLetsGoOfAForgottenUser: two services on one store, as two
// serve processes. Both cache alice's and bob's vectors and the vectors of
// alice's document collection; alice is then forgotten by another process
// (the store's forget, as `memoryd forget` or the other serve runs it).
// No request of either service would use alice's entries again (their
// generation is checked in every read), but they stayed in both
// processes' memory until evicted: a forgotten user's vectors, item ids,
// times and scopes, kept for good by processes with room to spare. A
// sweep (every minute in a running service) now drops them, and the
// collection's, and keeps bob's, which are current; also the empty entry
// a request of alice's made after the forget (her id, no vector).
func TestVectorCacheLetsGoOfAForgottenUser(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	ctx := ctxT(t)
	seedDogs(t, st, "alice")
	seedDogs(t, st, "bob")
	embedAll(t, st, emb, "alice")
	embedAll(t, st, emb, "bob")
	seedDogDocs(t, st, store.Owner{User: "alice"}, "kb", "Rex")
	embedChunks(t, st, emb)
	procs := []*harness{startHybrid(t, st, emb, nil), startHybrid(t, st, emb, nil)}
	for _, h := range procs {
		for _, u := range []string{"alice", "bob"} {
			if r := enrich(t, h, events.EnrichRequest{UserID: u, Message: canineQuestion}); r.Degraded || len(r.Context) == 0 {
				t.Fatalf("%s: degraded %v, %d items", u, r.Degraded, len(r.Context))
			}
		}
		if got := docsFound(t, h, events.DocsSearchRequest{UserID: "alice"}); len(got) == 0 {
			t.Fatal("alice's documents not found")
		}
		if n := enrichStats(t, h)["vector_cache_users"]; n != 3 {
			t.Fatalf("vector_cache_users %v before the forget; want 3 (alice, bob, alice's collection)", n)
		}
	}
	// What worker.Forget does to the database: the memory, then the
	// user's own collections.
	if _, _, err := st.ForgetUser(ctx, "alice", events.UserToken("alice"), store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteCollections(ctx, store.Owner{User: "alice"}); err != nil {
		t.Fatal(err)
	}
	// A request of alice's after the forget caches her as she is now:
	// no vector, an entry holding her id alone, which goes too.
	if r := enrich(t, procs[0], events.EnrichRequest{UserID: "alice", Message: canineQuestion}); len(r.Context) != 0 || r.Injection != "" {
		t.Fatalf("alice after her forget: %d items, injection %q", len(r.Context), r.Injection)
	}
	for i, h := range procs {
		n, err := h.svc.SweepVectorCache(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if users := enrichStats(t, h)["vector_cache_users"]; n != 2 || users != 1 {
			t.Fatalf("process %d: the sweep after alice's forget dropped %d entries, %v left; want alice's 2 dropped, bob's kept", i, n, users)
		}
		if r := enrich(t, h, events.EnrichRequest{UserID: "bob", Message: canineQuestion}); r.Degraded || len(r.Context) == 0 {
			t.Fatalf("bob after the sweep: degraded %v, %d items", r.Degraded, len(r.Context))
		}
		if n, err := h.svc.SweepVectorCache(ctx); err != nil || n != 0 {
			t.Fatalf("a sweep with nothing stale dropped %d: %v", n, err)
		}
	}
}
