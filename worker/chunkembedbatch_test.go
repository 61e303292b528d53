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

// TestChunkEmbedJobsBatchSmallDocuments: the sweep's (and a backfill's)
// chunk embed jobs for a knowledge base of small documents (one-paragraph
// FAQ entries put before embedding was on, or after a model change) pack
// many documents to a job, and so to a request. Before, a job held one
// document's chunks: an audit's 952 LongMemEval sessions (17,254 chunks)
// took 1,200 requests of 14 texts on average after a model change, and 60
// one-chunk documents here took 60 requests.
func TestChunkEmbedJobsBatchSmallDocuments(t *testing.T) {
	e := setup(t)
	const docs = 60
	for i := range docs {
		if _, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "faq",
			DocID: fmt.Sprintf("faq%02d.md", i), Content: fmt.Sprintf("# FAQ %d\n\nAnswer number %d is short.\n", i, i),
			Chunk: enricher.ChunkDocument}); err != nil {
			t.Fatal(err)
		}
	}
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := enq.EnqueueMissingChunkEmbeddings(e.ctx, "alice", "m1", 32, 5); err != nil || n != docs {
		t.Fatalf("enqueued %d documents (%v), want %d", n, err, docs)
	}
	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
	})
	e.waitChunksEmbedded("alice", "m1", docs)
	// 60 chunks, 32 a job: two jobs, two requests.
	if sent := srv.Sent(); len(sent) != 2 {
		t.Errorf("%d requests for %d one-chunk documents, want a few batches", len(sent), docs)
	}
}
