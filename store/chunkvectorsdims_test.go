package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestCollectionVectorsOfTheRecordedDimensions: CollectionVectors reads
// only chunk vectors of the dimensions recorded for the model, as
// UserVectors does for items; others (stored by an earlier release when a
// job's halves were answered by two models) count as missing.
func TestCollectionVectorsOfTheRecordedDimensions(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "guide.md", Content: guide})
	if r.Chunks < 2 {
		t.Fatalf("%d chunks, want 2 or more", r.Chunks)
	}
	if d, err := s.EmbeddingDims(ctx, "m", 4); err != nil || d != 4 {
		t.Fatalf("EmbeddingDims = %d, %v", d, err)
	}
	ts := chunkTargets(t, ctx, s, r, "m")
	if _, err := s.SaveChunkEmbeddings(ctx, "m", r.Collection.ID, r.DocID, r.Hash, []store.ChunkEmbeddingWrite{
		{ChunkIndex: 0, Sum: ts[0].Sum, Dims: 4, Vector: []byte{0, 0, 128, 63, 1, 2, 3, 4}},
		{ChunkIndex: 1, Sum: ts[1].Sum, Dims: 2, Vector: []byte{0, 0, 128, 63, 1, 2}},
	}); err != nil {
		t.Fatal(err)
	}
	cv := collectionVectors(t, ctx, s, r.Collection.ID, "m")
	if len(cv.Vectors) != 1 || cv.Vectors[0].ChunkIndex != 0 || cv.Vectors[0].Dims != 4 {
		t.Fatalf("CollectionVectors %+v; want only the chunk vector of 4 dimensions, the recorded ones", cv.Vectors)
	}
}
