package worker_test

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedTextsAnsweredInOtherDimensionsAreRecorded: a server that
// answers some texts, always the same ones, with vectors of other
// dimensions than the model's recorded ones (a proxy routing them to
// another model) has them recorded as refused, as a text refused as input
// is: the job saves the others' vectors and completes, and the next sweep
// neither enqueues nor sends them. Before, the reply mixing two sizes
// failed the whole job, and every sweep sent them again, for ever.
func TestEmbedTextsAnsweredInOtherDimensionsAreRecorded(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	items := aliceNotes(10)
	items[3].Answer = "ODD answer"
	items[7].Answer = "another ODD answer"
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	// The model's dimensions recorded first, from texts it answers in them.
	if _, err := e.store.EmbeddingDims(e.ctx, "m1", embeddingtest.DefaultDims); err != nil {
		t.Fatal(err)
	}
	srv.OtherDimsContaining("ODD", embeddingtest.DefaultDims/2)
	w, states, errs := embedTenInOneJob(t, e, srv)
	c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1")
	if err != nil || states[0] != "completed" || c.Embedded != 8 || c.Refused != 2 {
		t.Fatalf("job %s (error %q), count %+v (%v); want it completed, 8 embedded and the 2 texts answered in other dimensions recorded as refused", states[0], errs[0], c, err)
	}
	before := srv.Requests()
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil || n != 0 {
		t.Fatalf("the next sweep enqueued %d items (%v), want none", n, err)
	}
	e.waitEmbedJobsOver()
	if sent := srv.Requests() - before; sent != 0 {
		t.Errorf("the next sweep sent %d requests, want none", sent)
	}
}

// TestEmbedFirstTextInOtherDimensionsDoesNotSetTheModels: with no
// dimensions recorded for the model yet, a job whose first text the
// server answers in other dimensions than the others (and the control
// text) records the control text's as the model's, that text as refused.
// Before, the first vector's size was recorded as the model's, for good:
// the texts answered in the model's own were taken for the odd ones, and
// every later job failed as a model changed behind its name.
func TestEmbedFirstTextInOtherDimensionsDoesNotSetTheModels(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	items := aliceNotes(10)
	items[0].Answer = "ODD answer"
	// Inserted alone first, the lowest id: the job's first text.
	for _, batch := range [][]store.ContextWrite{items[:1], items[1:]} {
		if _, err := e.store.InsertContext(e.ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	srv.OtherDimsContaining("ODD", embeddingtest.DefaultDims/2)
	_, states, errs := embedTenInOneJob(t, e, srv)
	dims, err := e.store.EmbeddingDims(e.ctx, "m1", 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1")
	if err != nil || dims != embeddingtest.DefaultDims || states[0] != "completed" || c.Embedded != 9 || c.Refused != 1 {
		t.Fatalf("model's dimensions recorded %d, job %s (error %q), count %+v (%v); want %d, the job completed, 9 embedded and the text answered in other dimensions recorded as refused",
			dims, states[0], errs[0], c, err, embeddingtest.DefaultDims)
	}
}

// embedTenInOneJob starts a worker embedding with srv's model m1, sweeps
// alice's 10 items into one job and waits for its first attempt; it
// returns the worker and the embed jobs' states and errors.
func embedTenInOneJob(t *testing.T, e *env, srv *embeddingtest.Server) (*worker.Worker, []string, []string) {
	t.Helper()
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil || n != 10 {
		t.Fatalf("sweep enqueued %d items (%v), want 10 in one job", n, err)
	}
	var states, errs []string
	e.waitFor("the embed job's first attempt", func() (bool, string) {
		states, errs = e.embedJobs()
		return len(states) == 1 && (states[0] == "completed" || errs[0] != ""), fmt.Sprint(states, errs)
	})
	return w, states, errs
}
