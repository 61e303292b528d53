package worker_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// waitEmbedJobsOver waits until no embed job is left to run.
func (e *env) waitEmbedJobsOver() {
	e.t.Helper()
	e.waitFor("every embed job over", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')`, worker.EmbedJobKind).Scan(&n)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
}

// TestEmbedSweepSkipsTextsTheServerRefused: a text the server refuses as
// input, alone and by every start embedStart tries (llama.cpp's 500
// "input is too large to process"), is recorded as refused for the model:
// the next sweep neither enqueues nor sends it. Before, every hourly sweep
// enqueued it and sent it again (with its starts), refused each time, for
// ever. A refusal holds for its model only, and a backfill with
// --retry-refused (ForgetEmbeddingRefusals) finds it again.
func TestEmbedSweepSkipsTextsTheServerRefused(t *testing.T) {
	e := setup(t)
	srv := llamaTooLargeItems(t, e, 400)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	sweep := func() int {
		t.Helper()
		before := srv.Requests()
		n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 3)
		if err != nil {
			t.Fatal(err)
		}
		e.waitEmbedJobsOver()
		t.Logf("sweep: %d items enqueued, %d requests", n, srv.Requests()-before)
		return n
	}
	if n := sweep(); n != 10 {
		t.Fatalf("first sweep found %d items, want 10", n)
	}
	first := srv.Requests()
	if n := sweep(); n != 0 || srv.Requests() != first {
		t.Errorf("second sweep found %d items and sent %d requests, want none: the two refused texts are recorded as refused", n, srv.Requests()-first)
	}
	c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1")
	if err != nil || c.Items != 10 || c.Embedded != 8 || c.Refused != 2 {
		t.Errorf("count %+v (%v), want 10 items, 8 embedded, 2 refused", c, err)
	}
	if refs, err := e.store.MissingEmbeddings(e.ctx, "alice", "m2", 0, 100); err != nil || len(refs) != 10 {
		t.Errorf("items missing a vector of another model: %d (%v), want 10: a refusal is its model's", len(refs), err)
	}
	if n, err := e.store.ForgetEmbeddingRefusals(e.ctx, "alice", "m1"); err != nil || n != 2 {
		t.Fatalf("forgot %d refusals (%v), want 2", n, err)
	}
	if n := sweep(); n != 2 {
		t.Errorf("a sweep after the refusals were forgotten found %d items, want the 2 refused", n)
	}
	// A job of refused texts alone (the probe finds its shortest and
	// longest refused, as a refusal of every request looks) records them
	// too, once the control text is embedded.
	again := srv.Requests()
	if n := sweep(); n != 0 || srv.Requests() != again {
		t.Errorf("the sweep after a job of refused texts alone found %d items and sent %d requests, want none", n, srv.Requests()-again)
	}
}

// TestEmbedRefusalOfEveryRequestIsNotRecorded: a server that refuses every
// request (a parameter it does not take) refuses a job's one text, and
// the control text too: that refusal is the requests', not the text's,
// and is not recorded (the sweep tries the item again once the
// configuration is fixed).
func TestEmbedRefusalOfEveryRequestIsNotRecorded(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseOver(1)
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "alice", Question: "a note", Answer: "an answer", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedJobsOver()
	if refs, err := e.store.MissingEmbeddings(e.ctx, "alice", "m1", 0, 100); err != nil || len(refs) != 1 {
		t.Errorf("items missing a vector: %d (%v), want 1: a refusal of every request is not the text's", len(refs), err)
	}
}

// TestEmbedStartFailingIsNotRecordedAsRefused: a long text refused whole
// (over a 512-token model's context) whose shorter start then meets a
// failure of the server's (a 503 while it restarts, a timeout, a dropped
// connection) was refused for nothing it holds: it is not recorded as
// refused, and the next sweep sends it again, its start embedded once
// the server answers. Before, embedStart's failure counted as every start
// refused, and the item was left out by every sweep for good.
func TestEmbedStartFailingIsNotRecordedAsRefused(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseOver(3000)
	long := "LONG " + strings.Repeat("a pasted paragraph ", 400) // 7,605 bytes
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "alice", Question: "a note", Answer: "a short answer", CreatedAt: t0},
		{UserID: "alice", Question: "a long note", Answer: long, CreatedAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	// The batch (refused), the probe's shortest text alone (embedded),
	// the halves: the short one (embedded), the long one (refused); then
	// the long one's 4 KiB start: the server fails from there on.
	srv.FailFrom(5, http.StatusServiceUnavailable)
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedJobsOver()
	for i, in := range srv.Sent() {
		t.Logf("request %d: %d texts, the first %d bytes", i+1, len(in), len(in[0]))
	}
	srv.Recover()
	if c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || c.Refused != 0 {
		t.Errorf("count %+v (%v), want none refused: the server failed the text's start, it did not refuse it", c, err)
	}
	n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 1)
	if err != nil || n != 1 {
		t.Fatalf("the next sweep found %d items (%v), want the long one", n, err)
	}
	e.waitEmbedded("alice", "m1", 2)
}

// TestEmbedJobLeavesOutRefusedItems: a job that holds an item already
// recorded as refused for its current text (enqueued by the sweep of a
// serve of the release before 065, which knows no refusals, or a job
// retried for another of its items) does not send it again. Before, the
// skip held for this release's sweep and backfill only: during a rolling
// upgrade the old leader's hourly sweep had every refused text sent
// (whole, then by its starts, then the control text) again.
func TestEmbedJobLeavesOutRefusedItems(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	ids, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "alice", Question: "a pasted log", Answer: "POISON", CreatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedJobsOver()
	if c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || c.Refused != 1 {
		t.Fatalf("count %+v (%v), want the item refused", c, err)
	}
	before := srv.Requests()
	e.insertEmbedJob("alice", "m1", ids) // as an older release's sweep enqueues it
	e.waitEmbedJobsOver()
	if n := srv.Requests() - before; n != 0 {
		t.Errorf("a job holding the refused item sent %d requests, want none", n)
	}
}
