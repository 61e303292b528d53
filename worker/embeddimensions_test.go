package worker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// TestEmbedDimensionsChangeReembedsAsAModelChange: vectors asked in
// fewer dimensions (--embed-dimensions, OpenAI's "dimensions") are
// another model's as far as storage goes: a worker whose dimensions
// changed finds every item missing one of its vectors and embeds them
// all anew, beside the old vectors, as after a change of --embed-model.
// Under the same name, its replies of another size were refused as the
// model behind the name changed, and no item got a vector until
// `memoryd embed --backfill --dims`.
func TestEmbedDimensionsChangeReembedsAsAModelChange(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	var items []store.ContextWrite
	for i := range 4 {
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("note %d", i), Answer: fmt.Sprintf("answer %d", i), CreatedAt: t0})
	}
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	full := embedder(t, srv, "m1")
	w, stop := e.startWorker(extractor.NewRules(), withEmbedder(full, -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", full.Model(), 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedded("alice", full.Model(), 4)
	stop()

	short, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "m1", Dimensions: 16, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w, _ = e.startWorker(extractor.NewRules(), withEmbedder(short, -1))
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", short.Model(), 64, 1); err != nil || n != 4 {
		t.Fatalf("the sweep of %q found %d items (%v), want all 4", short.Model(), n, err)
	}
	e.waitEmbedJobsOver()
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", short.Model()); err != nil || n.Embedded != 4 {
		states, errs := e.embedJobs()
		t.Errorf("%s vectors: %+v (%v), want all 4 embedded anew (jobs %v, errors %q)", short.Model(), n, err, states, errs)
	}
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", full.Model()); err != nil || n.Embedded != 4 {
		t.Errorf("%s vectors: %+v (%v), want the old 4 kept", full.Model(), n, err)
	}
	uv, err := e.store.UserVectors(e.ctx, "alice", short.Model())
	if err != nil || len(uv.Vectors) != 4 || uv.Vectors[0].Dims != 16 {
		t.Errorf("vectors read for %s: %d (%v), want 4 of 16 dimensions", short.Model(), len(uv.Vectors), err)
	}
	if d := srv.Dimensions(); !slices.Contains(d, 16) || !slices.Contains(d, 0) {
		t.Errorf("dimensions sent %v, want none (0) by the first worker and 16 by the second", d)
	}
}
