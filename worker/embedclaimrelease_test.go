package worker_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
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
			var users []string
			for i := range 60 {
				users = append(users, fmt.Sprintf("u%02d", i))
			}
			e.enqueueSmallEmbedJobs("m1", users...)
			srv := embeddingtest.New(t)
			c.fail(srv)
			e.start(extractor.NewRules(), func(c *worker.Config) {
				withEmbedder(embedder(t, srv, "m1"), -1)(c)
				c.EmbedJobSize = 32
			})
			for _, u := range users {
				e.waitEmbedded(u, "m1", 2)
			}
			var unclaimable int
			if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND metadata ? $2`,
				worker.EmbedJobKind, store.UnclaimableKey).Scan(&unclaimable); err != nil {
				t.Fatal(err)
			}
			if unclaimable > 0 {
				t.Errorf("%d jobs marked unclaimable after a failure that was no text's", unclaimable)
			}
			if n := len(srv.Batches()); n > 16 {
				t.Errorf("%d requests answered with vectors for 120 one-item jobs, want a few batches", n)
			}
		})
	}
}
