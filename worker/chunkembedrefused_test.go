package worker_test

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestChunkEmbedSweepSkipsChunksTheServerRefused: a document chunk whose
// text the server refuses as input, alone and by every start tried, is
// recorded as refused for the model, as a context item is: the next sweep
// neither enqueues its document nor sends it. Before, chunk refusals were
// not recorded, and every sweep sent the refused chunk again, for ever.
// Forgotten (--retry-refused), the chunk is found again.
func TestChunkEmbedSweepSkipsChunksTheServerRefused(t *testing.T) {
	e := setup(t)
	r, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "kb", DocID: "d",
		Content: sections("heron", 3) + "## Log\n\nA pasted POISON log.\n", Chunk: enricher.ChunkDocument})
	if err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	sweep := func() int {
		t.Helper()
		before := srv.Requests()
		n, err := w.Enqueuer().EnqueueMissingChunkEmbeddings(e.ctx, "", "m1", 64, 3)
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor("every chunk embed job over", func() (bool, string) {
			var n int
			err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1
				AND state NOT IN ('completed', 'cancelled', 'discarded')`, worker.ChunkEmbedJobKind).Scan(&n)
			return err == nil && n == 0, fmt.Sprint(n, err)
		})
		t.Logf("sweep: %d documents enqueued, %d requests", n, srv.Requests()-before)
		return n
	}
	if n := sweep(); n != 1 {
		t.Fatalf("first sweep found %d documents, want 1", n)
	}
	c, err := e.store.CountChunkEmbeddings(e.ctx, "alice", "m1")
	if err != nil || c.Items != int64(r.Chunks) || c.Embedded != int64(r.Chunks-1) || c.Refused != 1 {
		t.Errorf("count %+v (%v), want %d chunks, %d embedded, 1 refused", c, err, r.Chunks, r.Chunks-1)
	}
	first := srv.Requests()
	if n := sweep(); n != 0 || srv.Requests() != first {
		t.Errorf("second sweep found %d documents and sent %d requests, want none: the refused chunk is recorded as refused", n, srv.Requests()-first)
	}
	if n, err := e.store.ForgetChunkEmbeddingRefusals(e.ctx, "alice", "m1"); err != nil || n != 1 {
		t.Fatalf("forgot %d chunk refusals (%v), want 1", n, err)
	}
	if n := sweep(); n != 1 {
		t.Errorf("a sweep after the refusal was forgotten found %d documents, want 1", n)
	}
}
