package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestForgetChunkRefusalsCountsByScope: the forgets of a model's chunk
// refusals, done collection by collection since they lock the documents
// first, forget those of every collection of the user (of every
// collection, shared ones too, when the user is empty), of that model
// alone, the stale variant those recorded before the model's dimensions
// last changed alone, and count each forgotten refusal once.
func TestForgetChunkRefusalsCountsByScope(t *testing.T) {
	ctx, s := setup(t)
	type spot struct {
		o     store.Owner
		coll  string
		model string
		n     int
	}
	spots := []spot{
		{alice, "kb1", "m", 2}, {alice, "kb2", "m", 1}, {store.Owner{User: "bob"}, "kb", "m", 1},
		{store.Owner{Shared: "team"}, "kb", "m", 2}, {alice, "kb3", "other", 1},
	}
	refuse := func() {
		for _, sp := range spots {
			r := put(t, ctx, s, store.DocumentPut{Owner: sp.o, Collection: sp.coll, DocID: "guide", Content: guide, Chunk: chunkWith})
			if n, err := s.SaveChunkEmbeddingRefusals(ctx, sp.model, r.Collection.ID, r.DocID, r.Hash, chunkTargets(t, ctx, s, r, sp.model)[:sp.n]); err != nil || n != int64(sp.n) {
				t.Fatalf("refused %d (%v)", n, err)
			}
		}
	}
	left := func() (n int) {
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM chunk_embedding_refusals`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	refuse()
	if n, err := s.ForgetChunkEmbeddingRefusals(ctx, "alice", "m"); err != nil || n != 3 || left() != 4 {
		t.Fatalf("alice: forgot %d (%v), %d left; want 3, 4 left", n, err, left())
	}
	if n, err := s.ForgetChunkEmbeddingRefusals(ctx, "", "m"); err != nil || n != 3 || left() != 1 {
		t.Fatalf("all: forgot %d (%v), %d left; want 3 (bob, shared), 1 left", n, err, left())
	}
	refuse()
	if _, err := s.EmbeddingDims(ctx, "m", 4); err != nil {
		t.Fatal(err)
	}
	// Alice's kb1 chunk 0 and the shared collection's two refused before
	// the model changed; "other" refused chunk 1 too now (chunk 0 stayed).
	if _, err := s.Pool().Exec(ctx, `UPDATE embedding_models SET recorded_at = now() - interval '30 minutes' WHERE model = 'm';
		UPDATE chunk_embedding_refusals r SET refused_at = now() - interval '1 hour' FROM collections c
		WHERE c.id = r.collection_id AND ((c.name = 'kb1' AND r.chunk_index = 0) OR c.owner_kind = 'shared')`); err != nil {
		t.Fatal(err)
	}
	if _, n, err := s.ForgetStaleEmbeddingRefusals(ctx, "alice", "m"); err != nil || n != 1 {
		t.Fatalf("alice stale: forgot %d (%v); want 1", n, err)
	}
	if _, n, err := s.ForgetStaleEmbeddingRefusals(ctx, "", "m"); err != nil || n != 2 || left() != 5 {
		t.Fatalf("all stale: forgot %d (%v), %d left; want 2, 5 left", n, err, left())
	}
}
