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

// llamaTooLarge is llama.cpp server's reply to an embedding input longer
// than its physical batch (-ub, 512 tokens by default): a 500, though
// no attempt can pass it.
const llamaTooLarge = `{"error":{"code":500,"message":"input is too large to process. increase the physical batch size","type":"server_error"}}`

// llamaTooLargeItems is a fake llama.cpp server refusing every text that
// holds LONG with its 500 "input is too large to process", and alice's 10
// items stored, the third and seventh a pasted paragraph (LONG) repeated
// n times.
func llamaTooLargeItems(t *testing.T, e *env, n int) *embeddingtest.Server {
	t.Helper()
	srv := embeddingtest.New(t)
	srv.FailContaining("LONG", http.StatusInternalServerError)
	srv.ErrorBody(llamaTooLarge)
	items := aliceNotes(10)
	items[2].Answer = "LONG " + strings.Repeat("a pasted paragraph ", n)
	items[6].Answer = "LONG " + strings.Repeat("another pasted paragraph ", n)
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestEmbedLlamaCppInputTooLargeIsARefusal: llama.cpp answers a text over
// its physical batch with a 500 saying so; that text is refused, as a 400
// over a model's context is: it stays lexical-only, the job's other items
// get their vectors and the job completes at its first attempt. Before,
// the 500 was taken for the server's passing trouble: the job retried its
// 10 attempts over 17 minutes, the hourly sweep again (an embeddings walk
// with llama.cpp's default -ub 512: 102 of 200 LongMemEval items, 422
// requests and 1,614 texts sent in the first 15 s for 201 texts).
func TestEmbedLlamaCppInputTooLargeIsARefusal(t *testing.T) {
	e := setup(t)
	srv := llamaTooLargeItems(t, e, 200)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 3); err != nil || n != 10 {
		t.Fatalf("backfill enqueued %d items (%v), want 10 in one job", n, err)
	}
	e.waitFor("the embed job's first attempt over", func() (bool, string) {
		var state string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&state)
		return err == nil && state != "available" && state != "running", fmt.Sprint(state, err)
	})
	states, errs := e.embedJobs()
	if len(states) != 1 || states[0] != "completed" {
		t.Errorf("embed job %v (last error %q), want completed at its first attempt: the two texts are refused, not the server failing", states, errs)
	}
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || n.Embedded != 8 || n.Items != 10 {
		t.Errorf("after the job: %+v (%v), want 8 of 10 items embedded, the two too large without", n, err)
	}
}

// TestEmbedTextOverASmallContextGetsItsStart: a server whose model holds
// 512 tokens (mxbai-embed-large, the BERT models TEI serves, llama.cpp's
// default batch) refuses a text of a few KB that the 8 KiB cut lets
// through; the text's start, cut shorter, is embedded instead, as the
// 8 KiB cut means a long text to get the vector of its start. Before,
// such a text got no vector at all (the embeddings walk: 102 of 200
// LongMemEval items lexical-only against a 512-token server).
func TestEmbedTextOverASmallContextGetsItsStart(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseOver(2000)
	items := []store.ContextWrite{
		{UserID: "alice", Question: "a short note", Answer: "kept short", CreatedAt: t0},
		{UserID: "alice", Question: "a pasted page", Answer: strings.Repeat("a pasted paragraph of a page ", 200), CreatedAt: t0}, // 5.8 KB
	}
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the embed job finished", func() (bool, string) {
		var state string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&state)
		return err == nil && state != "available" && state != "running" && state != "retryable", fmt.Sprint(state, err)
	})
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || n.Embedded != 2 {
		t.Errorf("after the job: %+v (%v), want both items embedded, the long one by its start", n, err)
	}
	for _, in := range srv.Inputs() {
		if len(in) > 8<<10 {
			t.Errorf("a text of %d bytes sent, over the 8 KiB cut", len(in))
		}
	}
}
