package worker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// A batch that fails for no text's sake (a 429 with Retry-After, a 503)
// gives its claimed jobs back to be claimed again, not to run alone: the
// backlog still goes in batches. Before, one 503 under a backlog of 120
// one-item jobs marked 31 of them unclaimable (36 requests with vectors
// instead of 4), and a 2 s stretch of 429s 119 of them (120 requests).
func TestEmbedOverloadedServerKeepsBatching(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(*embeddingtest.Server)
	}{
		{"one 503", func(s *embeddingtest.Server) { s.FailNext(1, http.StatusServiceUnavailable) }},
		{"429s for 2s", func(s *embeddingtest.Server) {
			s.Fail(http.StatusTooManyRequests, "1")
			time.AfterFunc(2*time.Second, s.Recover)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			users := userIDs(60)
			e.enqueueSmallEmbedJobs("m1", users...)
			srv := embeddingtest.New(t)
			c.fail(srv)
			e.start(extractor.NewRules(), func(c *worker.Config) {
				withEmbedder(embedder(t, srv, "m1"), -1)(c)
				c.EmbedJobSize = 32
			})
			e.checkStillBatching(srv, users, 16, "after a failure that was no text's")
		})
	}
}

// After an outage, the backlog of jobs it held back (a 503 without
// Retry-After is the server down, no text's fault: the jobs wait for it)
// still goes in batches: a job run again claims, and is claimed, like a
// new one. Before, only a job's first run claimed and only jobs that never
// ran were claimed, so every job the outage had held sent its own request
// once the server was back.
func TestEmbedBacklogAfterAnOutageGoesInBatches(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobs("m1", users...)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedJobSize = 32
	})
	e.waitHeldOnce(24)
	srv.Recover()
	e.checkStillBatching(srv, users, 16, "after an outage of 503s")
	e.checkNoAttemptSpent("an outage of 503s")
}
