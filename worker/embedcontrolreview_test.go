package worker_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

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
	e.waitEmbedJobsEnded("")
	batchesWithPoison := batchesHolding(srv, "poison")
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
	batchesWithPoison := batchesHolding(srv, "poison")
	// Three excused, the fourth blamed.
	if batchesWithPoison > 4 {
		t.Errorf("the crashing text was in %d requests of several texts, want 4 at most", batchesWithPoison)
	}
	e.waitEmbedJobsEnded("")
	for _, r := range e.embedJobRows() {
		if !strings.Contains(r.text, "poison") && r.state != "completed" {
			t.Errorf("job %d: %s after %d errors (last %q), want completed", r.id, r.state, r.errors, r.lastError)
		}
	}
}
