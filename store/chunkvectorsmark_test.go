package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestChunkCountAtMarkLeavesOutDocumentsPutAfter: a backfill's wait
// counts the chunks of the documents put before its mark, by their put
// time (coalesce(put_at, created_at), as forget reads it): a document put
// again with new content after the mark is new memory, which its own jobs
// embed. Before, the count read created_at, the first put's, and waited
// for every document re-put meanwhile too (beside a serve that keeps
// re-putting, a wait that did not end).
func TestChunkCountAtMarkLeavesOutDocumentsPutAfter(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "a.md", Content: guide})
	b := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "b.md", Content: guide + "\nOther.\n"})
	mark, err := s.MarkEmbeddings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.CountChunkEmbeddingsAt(ctx, "alice", "m", mark)
	if err != nil {
		t.Fatal(err)
	}
	b2 := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "b.md", Content: guide + "\nOther, and more.\n"})
	if b2.Unchanged {
		t.Fatalf("re-put %+v, want new content", b2)
	}
	after, err := s.CountChunkEmbeddingsAt(ctx, "alice", "m", mark)
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Items - int64(b.Chunks); after.Items != want {
		t.Errorf("chunks counted at the mark after b.md was put again: %d, want %d (%d before, less b.md's %d): b.md is put after the mark", after.Items, want, before.Items, b.Chunks)
	}
}
