package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// waitChunkJobsOver waits until no chunk embed job is left to run.
func (e *env) waitChunkJobsOver() {
	e.t.Helper()
	e.waitFor("every chunk embed job over", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, worker.ChunkEmbedJobKind).Scan(&n)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
}

// TestChunkEmbedJobsOfAnEditSendTheEditedChunkAlone: a put of a
// document with one section's sentence edited sends that section's chunk
// alone to the embeddings server; the others keep their vectors, which
// are still their texts'. Before, the put deleted every chunk's vector
// and its job sent all six chunks again.
func TestChunkEmbedJobsOfAnEditSendTheEditedChunkAlone(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	p := store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", DocID: "d", Content: sections("otter", 6),
		Chunk: enricher.ChunkDocument, Chunking: "1"}
	r, err := e.store.PutDocument(e.ctx, p)
	if err != nil || r.Chunks != 6 {
		t.Fatalf("put %+v (%v): want 6 chunks", r, err)
	}
	e.waitChunksEmbedded("alice", "m1", 6)
	e.waitChunkJobsOver()
	first := len(srv.Inputs())

	p.Content = strings.Replace(p.Content, "The otter fact number 3 is here.", "The otter fact number 3 was edited.", 1)
	if r, err = e.store.PutDocument(e.ctx, p); err != nil || r.Chunks != 6 {
		t.Fatalf("edited put %+v (%v): want 6 chunks", r, err)
	}
	e.waitChunksEmbedded("alice", "m1", 6)
	e.waitChunkJobsOver()
	if sent := srv.Inputs()[first:]; len(sent) != 1 || !strings.Contains(sent[0], "was edited") {
		t.Errorf("after one section was edited, %d chunks sent again: %q; want the edited one alone", len(sent), sent)
	}
	e.checkChunkVectors(r.Collection.ID, "m1")
}
