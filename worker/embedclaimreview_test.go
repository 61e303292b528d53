package worker_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// downEmbedder is an embedding client of srv whose connections are
// refused while down is set: the server is not running (restarting, or
// not started yet), and nothing was sent.
func downEmbedder(t *testing.T, srv *embeddingtest.Server, model string, down *atomic.Bool) *embedding.Client {
	t.Helper()
	d := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
		}
		return d.DialContext(ctx, network, addr)
	}}
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: model, Timeout: 5 * time.Second, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A server that is down (connections refused: nothing was sent, so no
// text can be the cause) is no text's fault: like a 503, the backlog it
// held back goes in batches once it is back, and no job spent an attempt.
func TestEmbedBacklogAfterServerDownGoesInBatches(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobs("m1", users...)
	srv := embeddingtest.New(t)
	var down atomic.Bool
	down.Store(true)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(downEmbedder(t, srv, "m1", &down), -1)(c)
		c.EmbedJobSize = 32
	})
	e.waitHeldOnce(24)
	down.Store(false)
	e.checkStillBatching(srv, users, 16, "after the server was down")
	e.checkNoAttemptSpent("the server's outage")
}

// A job on its last attempt that claims a job whose text fails the server
// must not be given up for that other job's text: its own item is fine,
// and nothing (no sweep runs here) would embed it again. Whether the
// batch is blamed (a 500 for that text) or excused (the text crashes the
// server, whose control request then answers 503 while it comes back),
// the claimer runs again without spending an attempt. A review found the
// excused claimer charged, and on its last attempt cancelled.
func TestEmbedLastAttemptNotSpentOnAClaimedText(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(*embeddingtest.Server)
	}{
		{"a 500 for it", func(s *embeddingtest.Server) { s.FailContaining("poison", http.StatusInternalServerError) }},
		{"it crashes the server", func(s *embeddingtest.Server) {
			s.CrashOnAnswering("poison", 1, http.StatusServiceUnavailable, "1")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			users := []string{"u00", "u01", "u02"}
			e.enqueueSmallEmbedJobs("m1", users...)
			if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "zed", Question: "poison pill", Answer: "boom", CreatedAt: t0}}); err != nil {
				t.Fatal(err)
			}
			e.enqueueEmbedJobsOf("zed", "m1")
			// The oldest job has spent all its attempts but one (e.g. on an
			// outage of 503s, which leaves it claimable).
			var first int64
			if err := e.store.Pool().QueryRow(e.ctx, `UPDATE river_job SET attempt = max_attempts - 1
				WHERE id = (SELECT min(id) FROM river_job WHERE kind = $1) RETURNING id`, worker.EmbedJobKind).Scan(&first); err != nil {
				t.Fatal(err)
			}
			srv := embeddingtest.New(t)
			c.fail(srv)
			e.start(extractor.NewRules(), func(c *worker.Config) {
				withEmbedder(embedder(t, srv, "m1"), -1)(c)
				c.EmbedWorkers = 1
			})
			if state := e.waitJobEnded(first); state != "completed" {
				t.Errorf("job %d, on its last attempt, ended %s (it claimed the poison item: %v); its own item has no vector and nothing retries it",
					first, state, batchesHolding(srv, "poison") > 0)
			}
		})
	}
}

// A claimer whose batch the server refuses for claimed texts (the probe
// finds the batch's shortest and longest text refused alone, and takes the
// refusal for the request's) must not be given up on its first attempt:
// its own text is fine.
func TestEmbedClaimerNotCancelledForClaimedRefusals(t *testing.T) {
	e := setup(t)
	users := []string{"u00", "u01"}
	e.enqueueSmallEmbedJobs("m1", users...)
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "zed", Question: "zz", CreatedAt: t0},
		{UserID: "zed", Question: "zz " + strings.Repeat("lorem ipsum ", 300), CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	e.enqueueEmbedJobsOf("zed", "m1")
	var first int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT min(id) FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&first); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.RefuseContaining("zz")
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedWorkers = 1
	})
	state := e.waitJobEnded(first)
	if state != "completed" {
		t.Errorf("job %d ended %s on its first attempt, for texts of the jobs it claimed; requests: %d", first, state, len(srv.Sent()))
	}
}
