package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// saveChunkVectors saves a vector (of dims 4, any bytes) for every chunk of
// the document's content r, and returns how many were saved.
func saveChunkVectors(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, model string) int64 {
	t.Helper()
	n, err := s.SaveChunkEmbeddings(ctx, model, r.Collection.ID, r.DocID, r.Hash, chunkVectorWrites(t, ctx, s, r, model))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// chunkVectorWrites is a vector for each chunk of r that model has none
// for.
func chunkVectorWrites(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, model string) []store.ChunkEmbeddingWrite {
	t.Helper()
	ts := chunkTargets(t, ctx, s, r, model)
	ws := make([]store.ChunkEmbeddingWrite, len(ts))
	for i, tg := range ts {
		ws[i] = store.ChunkEmbeddingWrite{ChunkIndex: tg.ChunkIndex, Sum: tg.Sum, Dims: 4, Vector: []byte{0, 0, 128, 63, 1, 2, 3, 4}}
	}
	return ws
}

// chunkTargets are the chunks of r that model has no vector for.
func chunkTargets(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, model string) []store.ChunkEmbeddingTarget {
	t.Helper()
	ts, err := s.ChunkEmbeddingTargets(ctx, r.Collection.ID, r.DocID, r.Hash, 0, 1000, model)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func collectionVectors(t *testing.T, ctx context.Context, s *store.Store, id int64, model string) store.CollectionVectors {
	t.Helper()
	cv, err := s.CollectionVectors(ctx, id, model)
	if err != nil {
		t.Fatal(err)
	}
	return cv
}

// TestChunkVectorsGenerations: a collection's generation is 0 until it has
// a vector, and changes whenever its usable vectors may have: vectors
// saved, a re-put with new content (its vectors go with its chunks, in the
// put's transaction, but for those of the chunks it cuts alike, saved
// again under the new content), a delete; an unchanged re-put changes
// nothing. A vector of content the document no longer holds is not saved.
func TestChunkVectorsGenerations(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide})
	if cv := collectionVectors(t, ctx, s, r.Collection.ID, "m"); cv.Generation != 0 || len(cv.Vectors) != 0 {
		t.Fatalf("before any vector: %+v", cv)
	}
	if n := saveChunkVectors(t, ctx, s, r, "m"); n != int64(r.Chunks) || n < 2 {
		t.Fatalf("saved %d vectors for %d chunks", n, r.Chunks)
	}
	cv := collectionVectors(t, ctx, s, r.Collection.ID, "m")
	g1 := cv.Generation
	if g1 == 0 || len(cv.Vectors) != r.Chunks || cv.Vectors[0].DocID != "guide.md" || cv.Vectors[1].ChunkIndex != 1 {
		t.Fatalf("after saving: %+v", cv)
	}
	if n := saveChunkVectors(t, ctx, s, r, "m"); n != 0 {
		t.Fatalf("nothing missing, yet %d targets saved", n)
	}
	if again := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide}); !again.Unchanged {
		t.Fatalf("re-put %+v", again)
	}
	if g := collectionVectors(t, ctx, s, r.Collection.ID, "m").Generation; g != g1 {
		t.Fatalf("an unchanged re-put moved the generation %d → %d", g1, g)
	}
	r2 := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide + "\nMore text.\n"})
	cv = collectionVectors(t, ctx, s, r.Collection.ID, "m")
	if cv.Generation == g1 || len(cv.Vectors) != r2.Chunks-1 || cv.Vectors[len(cv.Vectors)-1].ChunkIndex == r2.Chunks-1 {
		t.Fatalf("after a re-put with new content (appended to its last chunk): %+v, want a new generation and the vectors of the others", cv)
	}
	// A job of the old content saves nothing.
	if n, err := s.SaveChunkEmbeddings(ctx, "m", r.Collection.ID, r.DocID, r.Hash,
		[]store.ChunkEmbeddingWrite{{ChunkIndex: 0, Dims: 4, Vector: []byte{0, 0, 128, 63, 1, 2, 3, 4}}}); err != nil || n != 0 {
		t.Fatalf("a vector of the old content: saved %d (%v)", n, err)
	}
	saveChunkVectors(t, ctx, s, r2, "m")
	g2 := collectionVectors(t, ctx, s, r.Collection.ID, "m").Generation
	if ok, err := s.DeleteDocument(ctx, alice, "kb", "guide.md"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if cv := collectionVectors(t, ctx, s, r.Collection.ID, "m"); cv.Generation == g2 || len(cv.Vectors) != 0 {
		t.Fatalf("after the delete: %+v", cv)
	}
}

// TestSearchChunksHybridAccess: the vector side is offered only the
// searched collections, may load only theirs, and its picks of any other
// collection are dropped.
func TestSearchChunksHybridAccess(t *testing.T) {
	ctx, s := setup(t)
	ra := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide})
	rb := put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: "bob"}, Collection: "kb", Source: "secret.md", Content: guide})
	saveChunkVectors(t, ctx, s, ra, "m")
	saveChunkVectors(t, ctx, s, rb, "m")
	var offered []int64
	var loadErr error
	pick := func(ctx context.Context, gens map[int64]int64, load store.ChunkVectorLoader) ([]store.ChunkPick, error) {
		for id := range gens {
			offered = append(offered, id)
		}
		_, loadErr = load(ctx, rb.Collection.ID, "m")
		return []store.ChunkPick{{CollectionID: rb.Collection.ID, DocID: "secret.md", ChunkIndex: 0, Score: 0.9},
			{CollectionID: ra.Collection.ID, DocID: "guide.md", ChunkIndex: 1, Score: 0.8}}, nil
	}
	var vector []store.VectorChunk
	rank := func(c store.HybridChunkCandidates) []store.ChunkHit {
		vector = c.Vector
		var hits []store.ChunkHit
		for _, v := range c.Vector {
			h := v.Hit
			h.Score = v.Score
			hits = append(hits, h)
		}
		return hits
	}
	hits, err := s.SearchChunksHybrid(ctx, store.ChunkQuery{Reader: alice, Keywords: []string{"penguin"}}, pick, rank)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(offered, []int64{ra.Collection.ID}) || loadErr == nil {
		t.Errorf("offered %v (want only alice's %d), loading bob's: %v", offered, ra.Collection.ID, loadErr)
	}
	if len(vector) != 1 || len(hits) != 1 || hits[0].Source != "guide.md" || hits[0].ChunkIndex != 1 || hits[0].Text == "" || hits[0].Collection != "kb" {
		t.Fatalf("hits %+v (vector side %+v), want alice's chunk 1 only, with its text", hits, vector)
	}
}

// A chunk embed job's save that a re-put overtakes between the statement's
// snapshot (which still holds the old chunks) and its foreign key check
// saves nothing and is no error: the job found other content. It failed on
// the foreign key, and the job was retried and logged as an embedding
// failure.
func TestSaveChunkEmbeddingsOvertakenByARePut(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide})
	ws := chunkVectorWrites(t, ctx, s, r, "m")
	if len(ws) == 0 {
		t.Fatal("no chunk to embed")
	}
	// The re-put's delete of the old chunks, not yet committed.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM doc_chunks WHERE collection_id = $1 AND doc_id = $2`, r.Collection.ID, r.DocID); err != nil {
		t.Fatal(err)
	}
	// The save waits on the deleted rows' locks for its foreign key check.
	done := saveWaitingOnALock(t, s, tx, "INSERT INTO chunk_embeddings", func() (int64, error) {
		return s.SaveChunkEmbeddings(ctx, "m", r.Collection.ID, r.DocID, r.Hash, ws)
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.n != 0 {
		t.Fatalf("save overtaken by a re-put: %d saved, %v; want nothing saved and no error", res.n, res.err)
	}
}
