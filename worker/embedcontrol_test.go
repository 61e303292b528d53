package worker_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// A server failing every request with a 500 for a while (overloaded or
// broken: Ollama and vLLM answer 500 for more than a bad text) fails a
// request of one short control text too, so no batch's texts are blamed:
// the backlog still goes in batches once it is back. Before, every batch
// that failed marked its jobs to run alone (an audit: 45 of 123 jobs, 47
// requests instead of 2-3, after a few seconds of 500s).
func TestEmbedServerFailingForAWhileKeepsBatching(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobsWith(25, "m1", users...)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusInternalServerError, "")
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
		// Excused batches wait from the retry base, doubling: the 500s
		// end within their excuses (blameOf).
		c.JobRetryBase = 3 * time.Second
	})
	e.waitFor("two batches and their control requests failed", func() (bool, string) {
		failed := srv.Requests() - len(srv.Batches())
		return failed >= 4, fmt.Sprint(failed)
	})
	srv.Recover()
	e.checkStillBatching(srv, users, 16, "after 500s that the server answered every request with")
}

// One 500 (the server's passing trouble) costs nothing: the server embeds
// the control text, the batch is sent once more and succeeds, and no job
// fails or is marked. Before, the claimer and every job it had claimed
// ran alone from then on.
func TestEmbedOne500IsSentAgain(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobs("m1", users...)
	srv := embeddingtest.New(t)
	srv.FailNext(1, http.StatusInternalServerError)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 64
	})
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	if n := e.unclaimableJobs(); n != 0 {
		t.Errorf("%d jobs marked to run alone after one 500", n)
	}
	for _, r := range e.embedJobRows() {
		if r.errors > 0 {
			t.Errorf("job %d failed %d times (last %q) for one 500 the batch was sent again for", r.id, r.errors, r.lastError)
		}
	}
	// The first request failed; then one control text, and that batch
	// again (jobs running beside it may send theirs in between).
	sent := srv.Sent()
	controls := slices.IndexFunc(sent, func(in []string) bool { return slices.Equal(in, []string{"memory"}) })
	again := slices.IndexFunc(sent[1:], func(in []string) bool { return slices.Equal(in, sent[0]) })
	if controls < 1 || again+1 <= controls || len(sent) != len(srv.Batches())+1 {
		t.Errorf("requests %q: want the failed batch, a control text, the batch again, and no other request failed", sent)
	}
}

// A batch whose connection the server drops, and that then answers no
// control request either (it is restarting), is not blamed on its texts
// the first time: its jobs still batch when the server is back.
func TestEmbedServerRestartingKeepsBatching(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobsWith(25, "m1", users...)
	srv := embeddingtest.New(t)
	srv.Drop(-1)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 64
		// One batch at a time: a second claimer's batch dropped just
		// before the recovery, its control embedded after it, would be
		// blamed (a dropped batch on a working server).
		c.EmbedWorkers = 1
		// A first retry well after the server is back: a second failure
		// while it is down would be blamed (TestEmbedTextCrashingTheServer).
		c.JobRetryBase = 3 * time.Second
	})
	// Recovered once a batch was excused (its jobs marked), not once a job
	// was fetched (attempt > 0): recovered before the first
	// batch, the test passed without a drop; recovered between the batch
	// and its control request, the control was embedded and the batch
	// blamed (59 jobs marked, 1 run in 6).
	e.waitFor("a batch excused", func() (bool, string) {
		var n int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND metadata ? 'memoryd_embed_excused'`, worker.EmbedJobKind).Scan(&n)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
	srv.Recover()
	e.checkStillBatching(srv, users, 8, "after a dropped connection the server answered no control request after")
}

// A text that crashes the server (its connection dropped, and the next
// request too, while the runner restarts) looks like a server down to the
// control request, so its batch is excused once, and its jobs marked: the
// next batch holding one of them that fails so is blamed on its texts,
// and its jobs run alone. The other jobs get their vectors within their
// attempts, rather than each claimer that takes the crashing text
// spending one on it.
func TestEmbedTextCrashingTheServer(t *testing.T) {
	e := setup(t)
	users := userIDs(12)
	e.enqueueSmallEmbedJobsWith(8, "m1", users...)
	poison := e.seedOneJob("zed", 3, "poison pill")
	// First in River's order, so that claimers take it.
	e.exec(`UPDATE river_job SET scheduled_at = scheduled_at - interval '1 hour' WHERE id = $1`, poison)
	srv := embeddingtest.New(t)
	srv.CrashOn("poison", 1)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
	})
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	e.waitEmbedJobsEnded("poison")
	for _, r := range e.embedJobRows() {
		if !strings.Contains(r.text, "poison") && r.state != "completed" {
			t.Errorf("job %d: %s after %d errors (last %q), want completed", r.id, r.state, r.errors, r.lastError)
		}
	}
	batchesWithPoison := batchesHolding(srv, "poison")
	// Its first batch is excused and marks it; the next batch holding it
	// is blamed, and it runs alone from then on.
	if batchesWithPoison > 2 {
		t.Errorf("the crashing text was in %d requests of several texts", batchesWithPoison)
	}
	if n, _ := e.store.CountEmbeddings(e.ctx, "zed", "m1"); n.Embedded != 0 {
		t.Errorf("the crashing item has a vector: %+v", n)
	}
	// Its second failure was blamed on it: it ran alone from then on.
	e.waitJobEnded(poison)
	var alone bool
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT metadata ? $2 FROM river_job WHERE id = $1`, poison, store.UnclaimableKey).Scan(&alone); err != nil || !alone {
		t.Errorf("the crashing text's job ended without being blamed (%v): every batch that took it was excused", err)
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
