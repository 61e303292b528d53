package worker_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// A claimer on its last attempt whose batch held another job's text that
// crashes the server (the connection dropped; the control request then
// answered 503 with a Retry-After while the server comes back) is not
// given up for that text: the batch is excused, and the claimer runs
// again without spending an attempt, as it does when the batch is blamed
// (TestEmbedLastAttemptNotSpentOnAClaimedText). Before the control text,
// the drop blamed the batch and the claimer was handed back; with it, the
// claimer was charged and, on its last attempt, cancelled.
func TestEmbedLastAttemptNotSpentOnACrashingClaimedText(t *testing.T) {
	e := setup(t)
	users := []string{"u00", "u01", "u02"}
	e.enqueueSmallEmbedJobs("m1", users...)
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "zed", Question: "poison pill", Answer: "boom", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	e.enqueueEmbedJobsOf("zed", "m1")
	var first int64
	if err := e.store.Pool().QueryRow(e.ctx, `UPDATE river_job SET attempt = max_attempts - 1
		WHERE id = (SELECT min(id) FROM river_job WHERE kind = $1) RETURNING id`, worker.EmbedJobKind).Scan(&first); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.CrashOnAnswering("poison", 1, http.StatusServiceUnavailable, "1")
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedWorkers = 1
	})
	state := e.waitJobEnded(first)
	if state != "completed" {
		t.Errorf("job %d, on its last attempt, ended %s after its batch held a text that crashed the server; requests %q", first, state, srv.Sent())
	}
}

// A text that crashes the server, which then answers the control request
// with a 503 while it loads the model again (or a proxy in front of it
// answers for it), fails two batches at most, as a crash the control
// request finds the server silent after does (TestEmbedTextCrashingTheServer);
// and the jobs that claimed it are not given up for it.
func TestEmbedCrashingTextThenLoadingServerFailsTwoBatchesAtMost(t *testing.T) {
	e := setup(t)
	users := userIDs(12)
	e.enqueueSmallEmbedJobsWith(8, "m1", users...)
	// The newest job: the others' claims take it.
	e.seedOneJob("zed", 3, "poison pill")
	srv := embeddingtest.New(t)
	srv.CrashOnAnswering("poison", 1, http.StatusServiceUnavailable, "")
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
		c.EmbedWorkers = 1
	})
	e.waitFor("every embed job ended", func() (bool, string) {
		for _, r := range e.embedJobRows() {
			if slices.Contains([]string{"available", "running", "retryable", "scheduled"}, r.state) {
				return false, fmt.Sprintf("%+v", r)
			}
		}
		return true, ""
	})
	var batchesWithPoison int
	for _, in := range srv.Sent() {
		if len(in) > 1 && slices.ContainsFunc(in, func(s string) bool { return strings.Contains(s, "poison") }) {
			batchesWithPoison++
		}
	}
	if batchesWithPoison > 2 {
		t.Errorf("the crashing text was in %d requests of several texts, want 2 at most", batchesWithPoison)
	}
	charged := 0
	for _, r := range e.embedJobRows() {
		if strings.Contains(r.text, "poison") {
			continue
		}
		if r.state != "completed" {
			t.Errorf("job %d: %s after %d errors (last %q), want completed", r.id, r.state, r.errors, r.lastError)
		}
		if r.errors > 0 {
			charged++
		}
	}
	t.Logf("%d requests, %d with the crashing text among others; %d other jobs failed at least once: %q", len(srv.Sent()), batchesWithPoison, charged, srv.Sent())
}

// A text that crashes a server behind a proxy, which answers the crashing
// request and the control after it with a 500 (the backend is down), is
// excused a few times, as a server failing every request for a while is,
// then blamed: it fails a bounded number of batches, and the jobs that
// claimed it get their vectors. With every such failure taken for the
// server's, it was never blamed, and each batch that took it failed.
func TestEmbedCrashingTextBehindAProxyIsBlamedInTheEnd(t *testing.T) {
	e := setup(t)
	users := userIDs(12)
	e.enqueueSmallEmbedJobsWith(8, "m1", users...)
	// The newest job: the others' claims take it.
	poison := e.seedOneJob("zed", 3, "poison pill")
	srv := embeddingtest.New(t)
	srv.CrashOnBehindProxy("poison", 1, http.StatusInternalServerError)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
		c.EmbedWorkers = 1
	})
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	e.waitJobEnded(poison)
	var batchesWithPoison int
	for _, in := range srv.Sent() {
		if len(in) > 1 && slices.ContainsFunc(in, func(s string) bool { return strings.Contains(s, "poison") }) {
			batchesWithPoison++
		}
	}
	// Three excused, the fourth blamed.
	if batchesWithPoison > 4 {
		t.Errorf("the crashing text was in %d requests of several texts, want 4 at most", batchesWithPoison)
	}
	e.waitFor("every embed job ended", func() (bool, string) {
		for _, r := range e.embedJobRows() {
			if slices.Contains([]string{"available", "running", "retryable", "scheduled"}, r.state) {
				return false, fmt.Sprintf("%+v", r)
			}
		}
		return true, ""
	})
	for _, r := range e.embedJobRows() {
		if !strings.Contains(r.text, "poison") && r.state != "completed" {
			t.Errorf("job %d: %s after %d errors (last %q), want completed", r.id, r.state, r.errors, r.lastError)
		}
	}
}
