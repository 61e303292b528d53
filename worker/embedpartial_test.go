package worker_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
)

// Halving a batch the server refused (one text over its limit), the
// halves embedded before the server then failed (a 503) keep their
// vectors: the job saves them and its retry sends the rest alone. Before,
// they were dropped with the failure and sent, and billed, again.
func TestEmbedHalvesEmbeddedBeforeAFailureAreSaved(t *testing.T) {
	e := setup(t)
	e.logEmbedJobsOnFailure()
	texts := []string{"apples are red", "bananas are yellow", "cherries are dark", "dates are sweet",
		"figs are soft", "grapes are small", "kiwis are green", "a bad text, too long for the model"}
	job := e.seedOneJob("zed", 5, texts...)
	srv := embeddingtest.New(t)
	srv.RefuseContaining("bad")
	// The batch (refused), the probe of its shortest text, the first half
	// (embedded), then the second half and everything after: 503.
	srv.FailFrom(4, http.StatusServiceUnavailable)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	// A 503 is the server down: the job waits for it (outcome) rather
	// than spend an attempt.
	e.waitFor("the job failed once", func() (bool, string) {
		var errs int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_length(errors, 1), 0) + coalesce((metadata->>'memoryd_model_waits')::int, 0)
			FROM river_job WHERE id = $1`, job).Scan(&errs)
		return err == nil && errs >= 1, fmt.Sprint(errs, err)
	})
	if n, err := e.store.CountEmbeddings(e.ctx, "zed", "m1"); err != nil || n.Embedded != 4 {
		t.Errorf("after the failure: %+v (%v), want the first half's 4 vectors saved", n, err)
	}
	srv.Recover()
	e.waitFor("the other three embedded", func() (bool, string) {
		n, err := e.store.CountEmbeddings(e.ctx, "zed", "m1")
		return err == nil && n.Embedded == int64(len(texts)-1), fmt.Sprintf("%+v %v", n, err)
	})
	var sentApples int
	for _, in := range srv.Sent() {
		if slices.ContainsFunc(in, func(s string) bool { return s == "apples are red" || s == "apples are red\n" }) {
			sentApples++
		}
	}
	// In the refused batch and in the first half: never again.
	if sentApples != 2 {
		t.Errorf("a text of the embedded half was sent %d times, want 2: %q", sentApples, srv.Sent())
	}
}
