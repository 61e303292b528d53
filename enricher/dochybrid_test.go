package enricher_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// embedChunks saves a vector of every chunk lacking a current one, as the
// worker's chunk embed job does (heading path, newline, text; the text
// alone without headings).
func embedChunks(t *testing.T, st *store.Store, emb *embedding.Client) {
	t.Helper()
	ctx := ctxT(t)
	docs, err := st.MissingChunkEmbeddings(ctx, "", emb.Model(), store.DocCursor{}, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		ts, err := st.ChunkEmbeddingTargets(ctx, d.CollectionID, d.DocID, d.Hash, 0, d.Chunks, emb.Model())
		if err != nil {
			t.Fatal(err)
		}
		texts := make([]string, len(ts))
		for i, tg := range ts {
			texts[i] = tg.Text
			if len(tg.HeadingPath) > 0 {
				texts[i] = strings.Join(tg.HeadingPath, " > ") + "\n" + tg.Text
			}
		}
		vs, err := emb.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		ws := make([]store.ChunkEmbeddingWrite, len(ts))
		for i, tg := range ts {
			ws[i] = store.ChunkEmbeddingWrite{ChunkIndex: tg.ChunkIndex, Sum: tg.Sum, Dims: len(vs[i]), Vector: embedding.Encode(vs[i])}
		}
		if n, err := st.SaveChunkEmbeddings(ctx, emb.Model(), d.CollectionID, d.DocID, d.Hash, ws); err != nil || n != int64(len(ws)) {
			t.Fatalf("saved %d of %d chunk vectors: %v", n, len(ws), err)
		}
	}
}

// seedDogDocs puts into o's collection the fillers as documents, the dog's
// name (sharing no keyword with canineQuestion) as pets.md, and the dog
// food (sharing "canine"'s stem) as food.md.
func seedDogDocs(t *testing.T, st *store.Store, o store.Owner, collection, dogName string) {
	t.Helper()
	for i, f := range fillers {
		putDoc(t, st, o, collection, fmt.Sprintf("f%02d.md", i), f[0]+"\n\n"+f[1])
	}
	putDoc(t, st, o, collection, "pets.md", "My dog is called "+dogName+".")
	putDoc(t, st, o, collection, "food.md", "Which food do I buy for the puppy? Royal Canin puppy formula.")
}

// docsFound searches as user and returns "collection:source" of each
// chunk, best first.
func docsFound(t *testing.T, h *harness, req events.DocsSearchRequest) []string {
	t.Helper()
	if req.Query == "" {
		req.Query = canineQuestion
	}
	if req.MaxResults == nil {
		ten := 10
		req.MaxResults = &ten
	}
	r, err := h.client.SearchDocuments(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, c := range r.Chunks {
		if c.Score <= 0 || c.Score > 1 {
			t.Errorf("chunk %s/%s scored %v", c.Collection, c.Source, c.Score)
		}
		out = append(out, c.Collection+":"+c.Source)
	}
	return out
}

// TestDocsHybridFindsByMeaning: a chunk that shares no keyword with the
// question is found by its vector, by memory.docs.search and by enrich,
// over enrich's default docs threshold, beside the chunk found by its
// keywords; lexical search finds only the latter. Each request embeds its
// query once: enrich's context items and documents share the vector.
func TestDocsHybridFindsByMeaning(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	srv, emb := fakeEmbeddings(t)
	alice := store.Owner{User: "alice"}
	seedDogDocs(t, st, alice, "kb", "Rex")
	embedChunks(t, st, emb)

	lexical := start(t, st, nil)
	if got := docsFound(t, lexical, events.DocsSearchRequest{UserID: "alice"}); !slices.Equal(got, []string{"kb:food.md"}) {
		t.Fatalf("lexical search found %v, want only the dog food (the constructed disagreement)", got)
	}

	h := startHybrid(t, st, emb, nil)
	before := srv.Requests()
	got := docsFound(t, h, events.DocsSearchRequest{UserID: "alice"})
	if len(got) < 2 || !slices.Contains(got[:2], "kb:pets.md") || !slices.Contains(got[:2], "kb:food.md") {
		t.Fatalf("hybrid search found %v, want the dog's name and the dog food first", got)
	}
	if n := srv.Requests() - before; n != 1 {
		t.Errorf("a search made %d embedding requests, want 1", n)
	}
	before = srv.Requests()
	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Collections: []string{"kb"}})
	if r.Degraded || !slices.ContainsFunc(r.Documents, func(d events.DocumentChunk) bool {
		return d.Source == "pets.md" && strings.Contains(d.Text, "Rex") && d.Score >= events.DefaultDocsThreshold
	}) || !strings.Contains(r.Injection, "Rex") {
		t.Fatalf("hybrid enrich: %+v, want the dog's name over the default docs threshold, in the injection", r.Documents)
	}
	if n := srv.Requests() - before; n != 1 {
		t.Errorf("an enrich with documents made %d embedding requests, want 1 (shared by context and documents)", n)
	}
	if st := enrichStats(t, h); st["doc_vector_fallbacks"] != 0 || st["vector_cache_hits"] < 1 {
		t.Errorf("stats %v: want no fallback, the enrich's documents a cache hit", st)
	}
}

// TestDocsHybridAccess: the vector side reaches only the collections a
// search may read. Bob's private chunk about his dog is never returned to
// alice, even with bob's collection in the cache; the shared collection
// both are granted is found by both through its vectors, cached once.
func TestDocsHybridAccess(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	ctx := ctxT(t)
	seedDogDocs(t, st, store.Owner{User: "alice"}, "kb", "Rex")
	seedDogDocs(t, st, store.Owner{User: "bob"}, "kb", "Bolt")
	putDoc(t, st, store.Owner{Shared: "team"}, "wiki", "office.md", "My office dog is called Max.")
	for i, f := range fillers[:8] {
		putDoc(t, st, store.Owner{Shared: "team"}, "wiki", fmt.Sprintf("w%02d.md", i), f[0]+"\n\n"+f[1])
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := st.GrantReader(ctx, "team", u); err != nil {
			t.Fatal(err)
		}
	}
	embedChunks(t, st, emb)
	h := startHybrid(t, st, emb, nil)

	// Bob first: his collection and the shared one are cached.
	if got := docsFound(t, h, events.DocsSearchRequest{UserID: "bob"}); !slices.Contains(got, "kb:pets.md") || !slices.Contains(got, "team/wiki:office.md") {
		t.Fatalf("bob found %v, want his dog and the office dog", got)
	}
	for _, req := range []events.DocsSearchRequest{{UserID: "alice"}, {UserID: "alice", Collections: []string{"team/wiki"}}} {
		r, err := h.client.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: canineQuestion, Collections: req.Collections})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Chunks {
			if strings.Contains(c.Text, "Bolt") {
				t.Fatalf("alice (collections %v) was shown bob's chunk %+v", req.Collections, c)
			}
		}
	}
	if got := docsFound(t, h, events.DocsSearchRequest{UserID: "alice", Collections: []string{"team/wiki"}}); len(got) == 0 || got[0] != "team/wiki:office.md" {
		t.Fatalf("alice in team/wiki found %v, want the office dog first (by its vector)", got)
	}
	zero, ten := 0.0, 10
	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Collections: []string{"kb", "team/wiki"},
		DocsThreshold: &zero, DocsMaxResults: &ten})
	for _, d := range r.Documents {
		if strings.Contains(d.Text, "Bolt") {
			t.Fatalf("alice's enrich was shown bob's chunk %+v", d)
		}
	}
	if !slices.ContainsFunc(r.Documents, func(d events.DocumentChunk) bool { return strings.Contains(d.Text, "Rex") }) {
		t.Errorf("alice's enrich: %+v, want her dog", r.Documents)
	}
	// Bob's and alice's collections and the shared one, once; the two
	// users' (empty) context vectors from the enrich.
	if st := enrichStats(t, h); st["vector_cache_users"] != 4 {
		t.Errorf("stats %v: want 4 entries cached (3 collections, alice's items)", st)
	}
}

// TestDocsHybridConsistency: the per-collection cache never answers with
// what the store no longer holds: a re-put document's old chunk is not
// found by its old vector on the very next request, its new chunk is once
// embedded, a deleted document never again.
func TestDocsHybridConsistency(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	_, emb := fakeEmbeddings(t)
	ctx := ctxT(t)
	alice := store.Owner{User: "alice"}
	seedDogDocs(t, st, alice, "kb", "Rex")
	embedChunks(t, st, emb)
	h := startHybrid(t, st, emb, nil)
	texts := func() string {
		t.Helper()
		r, err := h.client.SearchDocuments(ctx, events.DocsSearchRequest{UserID: "alice", Query: canineQuestion})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, c := range r.Chunks {
			b.WriteString(c.Text + "|")
		}
		return b.String()
	}
	if got := texts(); !strings.Contains(got, "Rex") {
		t.Fatalf("before the re-put: %s", got)
	}
	putDoc(t, st, alice, "kb", "pets.md", "My dog is called Fido.")
	if got := texts(); strings.Contains(got, "Rex") || strings.Contains(got, "Fido") {
		t.Fatalf("re-put, not embedded yet: %s, want neither the old chunk nor the new (no keyword)", got)
	}
	embedChunks(t, st, emb)
	if got := texts(); !strings.Contains(got, "Fido") {
		t.Fatalf("re-put and embedded: %s, want the new chunk", got)
	}
	if ok, err := st.DeleteDocument(ctx, alice, "kb", "pets.md"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := texts(); strings.Contains(got, "Fido") {
		t.Fatalf("deleted: %s", got)
	}
}

// TestDocsHybridDegrades: with the embeddings server failing, document
// search and enrich answer lexically, without error or degradation.
func TestDocsHybridDegrades(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	srv, emb := fakeEmbeddings(t)
	seedDogDocs(t, st, store.Owner{User: "alice"}, "kb", "Rex")
	embedChunks(t, st, emb)
	h := startHybrid(t, st, emb, nil)
	srv.Fail(http.StatusInternalServerError, "")
	if got := docsFound(t, h, events.DocsSearchRequest{UserID: "alice"}); !slices.Equal(got, []string{"kb:food.md"}) {
		t.Fatalf("search with the server down found %v, want the lexical answer", got)
	}
	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: canineQuestion, Collections: []string{"kb"}})
	if r.Degraded || len(r.Documents) != 1 || r.Documents[0].Source != "food.md" {
		t.Fatalf("enrich with the server down: degraded %v, documents %+v, want the lexical answer", r.Degraded, r.Documents)
	}
	if st := enrichStats(t, h); st["query_embeddings_error"] != 2 {
		t.Errorf("stats %v: want 2 failed query embeddings", st)
	}
}
