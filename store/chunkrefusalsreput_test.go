package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestChunkRefusalsGoWithTheirDocumentsChunks: the embeddings server's
// refusals of a document's chunks (migration 068) go when a put of new
// content replaces the chunks (the foreign key's ON DELETE CASCADE), but
// for those of the chunks it cuts alike (the same heading path and text:
// the text refused), kept under the new content; they go when the
// document is deleted; a put of the same content keeps them, as it keeps
// the chunks, and another document's stay. A refusal outliving its chunk
// would leave the new chunk of that index out of every sweep.
func TestChunkRefusalsGoWithTheirDocumentsChunks(t *testing.T) {
	ctx, s := setup(t)
	a := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Content: guide})
	b := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "b", Content: guide + "\nMore text.\n"})
	if a.Chunks < 2 {
		t.Fatalf("document a has %d chunks, want 2 or more", a.Chunks)
	}
	for _, r := range []store.PutResult{a, b} {
		if n, err := s.SaveChunkEmbeddingRefusals(ctx, "m", r.Collection.ID, r.DocID, r.Hash, chunkTargets(t, ctx, s, r, "m")[:2]); err != nil || n != 2 {
			t.Fatalf("document %s: %d refusals saved (%v), want 2", r.DocID, n, err)
		}
	}
	refusals := func(doc string) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM chunk_embedding_refusals WHERE collection_id = $1 AND doc_id = $2`,
			a.Collection.ID, doc).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Content: guide}); !r.Unchanged || refusals("a") != 2 {
		t.Fatalf("a put of the same content (unchanged %v) left %d refusals, want the 2 kept", r.Unchanged, refusals("a"))
	}
	// Chunk 0's text edited, a section added: chunk 1 is cut alike.
	edited := strings.Replace(guide, "with sudo", "as root", 1) + "\n# Upgrade\n\nStop the daemon first.\n"
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Content: edited})
	if r.Unchanged || r.Chunks < 2 {
		t.Fatalf("a put of new content: %+v, want it chunked again", r)
	}
	var current, index int
	if err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE content_hash = $3), max(chunk_index)
		FROM chunk_embedding_refusals WHERE collection_id = $1 AND doc_id = $2`, a.Collection.ID, "a", r.Hash).Scan(&current, &index); err != nil {
		t.Fatal(err)
	}
	if n := refusals("a"); n != 1 || current != 1 || index != 1 {
		t.Errorf("a put of new content left %d refusals (%d of it, the last of chunk %d), want chunk 1's alone, of the new content", n, current, index)
	}
	if n := refusals("b"); n != 2 {
		t.Errorf("another document's refusals: %d after a's put, want 2", n)
	}
	if c, err := s.CountChunkEmbeddings(ctx, "alice", "m"); err != nil || c.Refused != 3 {
		t.Errorf("count after a's put: %+v (%v), want b's 2 refused and a's chunk 1", c, err)
	}
	if ok, err := s.DeleteDocument(ctx, alice, "kb", "b"); err != nil || !ok {
		t.Fatalf("delete b: %v %v", ok, err)
	}
	if n := refusals("b"); n != 0 {
		t.Errorf("a deleted document left %d refusals, want none", n)
	}
}
