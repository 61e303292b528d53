package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// chunkVectorRows are the stored vectors of model of the document of r
// under r's content hash, by chunk index.
func chunkVectorRows(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, model string) map[int][]byte {
	t.Helper()
	rows, err := s.Pool().Query(ctx, `SELECT chunk_index, vector FROM chunk_embeddings
		WHERE collection_id = $1 AND doc_id = $2 AND model = $3 AND content_hash = $4`, r.Collection.ID, r.DocID, model, r.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int][]byte{}
	for rows.Next() {
		var i int
		var v []byte
		if err := rows.Scan(&i, &v); err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// chunkKeys are the heading path and text of each chunk of r's document,
// by index, as an embedding job reads them.
func chunkKeys(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult) []string {
	t.Helper()
	var keys []string
	for _, tg := range chunkTargets(t, ctx, s, r, "never") {
		keys = append(keys, strings.Join(tg.HeadingPath, " > ")+"\n"+tg.Text)
	}
	return keys
}

// TestPutOfNewContentKeepsTheVectorsOfUnchangedChunks: a put of new
// content keeps, under the new content's hash, the vector of every new
// chunk whose heading path and text an old chunk of the document had
// (whatever its index now), of each model, and the refusals likewise:
// right after the put only the edited chunk is left to embed. An
// embedding job of the old content that saves after the put still saves
// nothing. Before, the put deleted every chunk's vector with its chunk,
// and each edit of one paragraph sent the whole document to the
// embeddings server again.
func TestPutOfNewContentKeepsTheVectorsOfUnchangedChunks(t *testing.T) {
	ctx, s := setup(t)
	p := store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1"}
	r := put(t, ctx, s, p)
	if r.Chunks != 3 {
		t.Fatalf("guide cut into %d chunks, want 3", r.Chunks)
	}
	// A vector of its own for each chunk and model, and a refusal of
	// model "r" for chunk 0.
	save := func(r store.PutResult, model string) {
		t.Helper()
		ts := chunkTargets(t, ctx, s, r, model)
		ws := make([]store.ChunkEmbeddingWrite, len(ts))
		for i, tg := range ts {
			ws[i] = store.ChunkEmbeddingWrite{ChunkIndex: tg.ChunkIndex, Sum: tg.Sum, Dims: 4,
				Vector: []byte{0, 0, 128, 63, byte(tg.ChunkIndex), model[0], byte(len(tg.Text)), 7}}
		}
		if n, err := s.SaveChunkEmbeddings(ctx, model, r.Collection.ID, r.DocID, r.Hash, ws); err != nil || n != int64(len(ws)) {
			t.Fatalf("saved %d of %d vectors of %s (%v)", n, len(ws), model, err)
		}
	}
	save(r, "m")
	save(r, "n")
	if n, err := s.SaveChunkEmbeddingRefusals(ctx, "r", r.Collection.ID, r.DocID, r.Hash, chunkTargets(t, ctx, s, r, "r")[:1]); err != nil || n != 1 {
		t.Fatalf("recorded %d refusals (%v), want 1", n, err)
	}
	oldKeys, oldM, oldN := chunkKeys(t, ctx, s, r), chunkVectorRows(t, ctx, s, r, "m"), chunkVectorRows(t, ctx, s, r, "n")
	staleJob := chunkVectorWrites(t, ctx, s, r, "other")

	// One sentence of the second chunk (Install > Windows) edited.
	p.Content = strings.Replace(guide, "Reboot afterwards.", "Reboot twice afterwards.", 1)
	edited := put(t, ctx, s, p)
	keys := chunkKeys(t, ctx, s, edited)
	if edited.Hash == r.Hash || len(keys) != 3 || keys[0] != oldKeys[0] || keys[1] == oldKeys[1] || keys[2] != oldKeys[2] {
		t.Fatalf("edited put %+v cut into %q, was %q: want chunk 1 alone changed", edited, keys, oldKeys)
	}
	for _, model := range []string{"m", "n"} {
		if ts := chunkTargets(t, ctx, s, edited, model); len(ts) != 1 || ts[0].ChunkIndex != 1 {
			t.Errorf("after a put editing chunk 1 alone, %d chunks to embed with %s again (%v); want chunk 1 alone", len(ts), model, ts)
		}
	}
	for model, old := range map[string]map[int][]byte{"m": oldM, "n": oldN} {
		got := chunkVectorRows(t, ctx, s, edited, model)
		if len(got) != 2 || !slices.Equal(got[0], old[0]) || !slices.Equal(got[2], old[2]) {
			t.Errorf("vectors of %s under the new content: %v; want chunks 0 and 2's as they were, %v and %v", model, got, old[0], old[2])
		}
	}
	if ts := chunkTargets(t, ctx, s, edited, "r"); len(ts) != 2 || ts[0].ChunkIndex != 1 {
		t.Errorf("after the put, chunks to embed with r: %v; want 1 and 2 (chunk 0's refusal kept)", ts)
	}
	if n, err := s.SaveChunkEmbeddings(ctx, "other", r.Collection.ID, r.DocID, r.Hash, staleJob); err != nil || n != 0 {
		t.Errorf("a job of the old content saved %d vectors after the put (%v); want none", n, err)
	}

	// A section inserted first: every old chunk moves one index down and
	// keeps its vectors there.
	save(edited, "m")
	before := chunkVectorRows(t, ctx, s, edited, "m")
	p.Content = "# Preface\n\nRead this first.\n\n" + p.Content
	moved := put(t, ctx, s, p)
	if ts := chunkTargets(t, ctx, s, moved, "m"); len(ts) != 1 || ts[0].ChunkIndex != 0 || moved.Chunks != 4 {
		t.Errorf("after a section was inserted first (%d chunks), chunks to embed again: %v; want chunk 0 alone", moved.Chunks, ts)
	}
	got := chunkVectorRows(t, ctx, s, moved, "m")
	for i := range 3 {
		if !slices.Equal(got[i+1], before[i]) {
			t.Errorf("chunk %d (was %d): vector %v, want %v", i+1, i, got[i+1], before[i])
		}
	}
	if t.Failed() {
		t.Logf("chunks: %q", chunkKeys(t, ctx, s, moved))
	}
}
