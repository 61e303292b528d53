package worker_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedOutageCarriedOverARestart: a process that starts while embed
// jobs wait for the embeddings server tells its client the server is
// down (embedding.Client.AssumeDown), as it tells the extractor of the
// model server's waiters: its requests are held back from its first
// failure, not each sent in the outage's first second (a restarted serve
// sent every embed job's request then).
func TestEmbedOutageCarriedOverARestart(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	newClient := func() *embedding.Client {
		emb, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "m1", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return emb
	}
	_, stop := e.startWorker(extractor.NewRules(), withEmbedder(newClient(), -1))
	e.publish(events.Turn{ID: "t1", UserID: "ann", UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	e.waitDone(1)
	e.waitFor("the embed job waiting for the server", func() (bool, string) {
		for id, j := range e.embedJobsByID() {
			if j.meta.Waits >= 1 {
				return true, ""
			}
			return false, fmt.Sprintf("job %d %s", id, j.state)
		}
		return false, "no embed job"
	})
	stop()
	var logs lockedBuffer
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(newClient(), -1)(c)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	e.waitFor("the restarted process told the server is down", func() (bool, string) {
		return strings.Contains(logs.String(), "embed jobs are waiting for the embeddings server"), logs.String()
	})
}
