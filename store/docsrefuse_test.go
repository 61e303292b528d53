package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestPutDocumentRefusesAnotherChunkSize: a put naming a chunk size other
// than its collection's is refused, naming chunk_tokens and both sizes;
// the collection's own size, or none, is taken. Before, the collection's
// size was used and the request's ignored without a word.
func TestPutDocumentRefusesAnotherChunkSize(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: guide, ChunkTokens: 100})
	_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "b", Content: guide, ChunkTokens: 300, Chunk: chunkWith})
	// "put document: " once: docs.put's 400 drops it; twice, the second
	// was in the message (`docs put` printed it).
	if !errors.Is(err, store.ErrInvalidDocument) || !strings.Contains(err.Error(), "chunk_tokens 300") || !strings.Contains(err.Error(), "100") ||
		strings.Count(err.Error(), "put document:") != 1 {
		t.Fatalf("put with chunk_tokens 300 into a collection of 100: %v, want a refusal naming chunk_tokens and both sizes", err)
	}
	if docs, _, err := s.ListDocuments(ctx, alice, "c", "", 10); err != nil || len(docs) != 1 {
		t.Fatalf("after the refusal: %+v %v, want document a only", docs, err)
	}
	for _, n := range []int{0, 100} {
		if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "b", Content: guide, ChunkTokens: n}); r.Collection.ChunkTokens != 100 {
			t.Fatalf("put with chunk_tokens %d: %+v", n, r)
		}
	}
}

// TestPutDocumentRefusesWhiteSpace: a document of white space only is
// refused, as empty content is. Before, it was stored with no chunk.
func TestPutDocumentRefusesWhiteSpace(t *testing.T) {
	ctx, s := setup(t)
	_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: " \n\t\r\n\u3000 ", Chunk: chunkWith})
	if !errors.Is(err, store.ErrInvalidDocument) || !strings.Contains(err.Error(), "white space") {
		t.Fatalf("put of white space: %v, want a refusal saying it is white space only", err)
	}
	if docs, err := s.Collections(ctx, alice); err != nil || len(docs) != 0 {
		t.Fatalf("a refused put left collections %+v (%v)", docs, err)
	}
}

// TestPutDocumentRefusesAnotherOverlap: a put naming an overlap_tokens
// other than its existing collection's is refused, naming both, as
// another chunk_tokens is. Before, it was taken at the collection's
// overlap without a word. An overlap over half a chunk is cut to half of
// the collection's chunk, so naming the one it was created with is no
// refusal, whatever chunk_tokens the put leaves out.
func TestPutDocumentRefusesAnotherOverlap(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "a", Content: guide, ChunkTokens: 100, OverlapTokens: 20})
	_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "b", Content: guide, OverlapTokens: 40, Chunk: chunkWith})
	if !errors.Is(err, store.ErrInvalidDocument) || !strings.Contains(err.Error(), "overlap_tokens 40") || !strings.Contains(err.Error(), "20") ||
		strings.Count(err.Error(), "put document:") != 1 {
		t.Fatalf("put with overlap_tokens 40 into a collection of 20: %v, want a refusal naming overlap_tokens and both", err)
	}
	if docs, _, err := s.ListDocuments(ctx, alice, "c", "", 10); err != nil || len(docs) != 1 {
		t.Fatalf("after the refusal: %+v %v, want document a only", docs, err)
	}
	for _, n := range []int{0, 20} {
		if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "b", Content: guide + fmt.Sprint(n), OverlapTokens: n}); r.Collection.OverlapTokens != 20 {
			t.Fatalf("put with overlap_tokens %d: %+v", n, r)
		}
	}
	// Created with an overlap over half its chunk: cut to half (2000).
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "big", DocID: "a", Content: guide, ChunkTokens: 4000, OverlapTokens: 2500})
	if r.Collection.OverlapTokens != 2000 {
		t.Fatalf("collection created with chunk 4000, overlap 2500: %+v, want the overlap cut to 2000", r.Collection)
	}
	for _, n := range []int{2000, 2500} {
		if _, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "b", Content: guide + fmt.Sprint(n), OverlapTokens: n, Chunk: chunkWith}); err != nil {
			t.Fatalf("put with overlap_tokens %d (cut to the collection's 2000), no chunk_tokens: %v", n, err)
		}
	}
}

// TestPutDocumentRefusesNoText: a document of headings or YAML front
// matter only, which the chunker cuts into no chunk, is refused (a 400
// from docs.put) with nothing written, as white space is. Before, it was
// stored "ready" with 0 chunks and answered ok: nothing of it was ever
// found, and nothing said so.
func TestPutDocumentRefusesNoText(t *testing.T) {
	ctx, s := setup(t)
	for name, content := range map[string]string{
		"headings":     "# Handbook\n\n## Secrets\n\nRotating keys\n=============\n",
		"front matter": "---\ntitle: \"Section index\"\nweight: 10\n---\n",
		"both":         "---\ntitle: Index\n---\n\n# Overview\n",
	} {
		_, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: content, Chunk: chunkWith})
		if !errors.Is(err, store.ErrInvalidDocument) || !strings.Contains(err.Error(), "no text outside its headings") {
			t.Errorf("put of %s only: %v, want a refusal saying it has no text outside its headings", name, err)
		}
	}
	if docs, err := s.Collections(ctx, alice); err != nil || len(docs) != 0 {
		t.Fatalf("refused puts left collections %+v (%v)", docs, err)
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: "# Handbook\n\nOne line.\n"}); r.Chunks != 1 {
		t.Fatalf("a heading and a line: %+v, want 1 chunk", r)
	}
}
