package worker_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedJobsWaitForARefusedKey: embed jobs meeting an embeddings server
// that refuses memoryd's key wait for it as for a server that is down,
// without spending attempts, and are not blamed on their texts; the
// worker says so (EmbedRefusing, /readyz's embeddings check). Once the
// key is fixed (rotated in --embed-api-key-file, without a restart; a
// 403 server's grant restored) their items are embedded; while the server
// fails otherwise between, the key is not blamed. Before, a 401,
// 403 or 404 was permanent: the jobs were cancelled, their items
// lexical-only until the hourly sweep.
//
//   - key rotated: the provider takes only the new key (401 for the old),
//     and the new one is then written to the key file;
//   - forbidden: the server answers 403 to everything (a key without the
//     right), which the client takes for the key's at the control
//     request that follows the batch's 403, then grants it again.
func TestEmbedJobsWaitForARefusedKey(t *testing.T) {
	for _, name := range []string{"key rotated", "forbidden"} {
		t.Run(name, func(t *testing.T) { embedJobsWaitForRefusal(t, name == "forbidden") })
	}
}

func embedJobsWaitForRefusal(t *testing.T, forbidden bool) {
	e := setup(t)
	srv := embeddingtest.New(t)
	path := filepath.Join(t.TempDir(), "key")
	secretfiletest.Replace(t, path, "old-key-0123456789\n")
	if forbidden {
		srv.Fail(http.StatusForbidden, "")
	} else {
		srv.SetKey("new-key-0123456789")
	}
	emb, err := embedding.New(embedding.Config{BaseURL: srv.URL, Model: "m1", Timeout: 5 * time.Second, APIKeyFile: path})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(emb, -1))
	users := []string{"ann", "bea", "cat"}
	for _, u := range users {
		e.publish(events.Turn{ID: "t-" + u, UserID: u, UserMessage: "My dog is named Rex.", AssistantResponse: "Good dog."})
	}
	e.waitDone(int64(len(users)))
	e.waitFor("the embed jobs waiting for the refused key", func() (bool, string) {
		jobs := e.embedJobsByID()
		waiting := 0
		for id, j := range jobs {
			if j.state == "cancelled" || j.state == "discarded" || j.errors != 0 {
				t.Fatalf("embed job %d: %s with %d errors; want it waiting for the key without spending attempts", id, j.state, j.errors)
			}
			if j.meta.Waits >= 2 {
				waiting++
			}
		}
		return waiting == len(users) && w.EmbedRefusing() != nil, fmt.Sprintf("%d of %d jobs waited twice, refusing %v", waiting, len(jobs), w.EmbedRefusing())
	})
	if r := w.EmbedRefusing(); !strings.Contains(r.Err, "refuses this configuration") || strings.Contains(r.Err, "old-key") {
		t.Errorf("EmbedRefusing: %q; want the configuration refused, the key hidden", r.Err)
	}
	// The server then fails otherwise (restarting behind its gateway):
	// its errors no longer refusals, the key is no longer blamed, before
	// any answer. Before, /readyz named --embed-api-key-file until one.
	srv.SetKey("")
	srv.Fail(http.StatusServiceUnavailable, "")
	e.waitFor("the refusal no longer reported", func() (bool, string) {
		return w.EmbedRefusing() == nil, fmt.Sprintf("refusing %+v", w.EmbedRefusing())
	})
	if forbidden {
		srv.Fail(http.StatusForbidden, "")
	} else {
		srv.Recover()
		srv.SetKey("new-key-0123456789")
	}
	if forbidden {
		srv.Recover()
	} else {
		secretfiletest.Replace(t, path, "new-key-0123456789\n")
	}
	for _, u := range users {
		e.waitEmbedded(u, "m1", 1)
	}
	e.waitFor("the embed jobs completed", func() (bool, string) {
		for id, j := range e.embedJobsByID() {
			if j.state != "completed" {
				return false, fmt.Sprintf("job %d %s", id, j.state)
			}
			if j.errors != 0 {
				t.Errorf("embed job %d: %d errors; want no attempt spent on the refused key", id, j.errors)
			}
		}
		return true, ""
	})
	var blamed int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND metadata ? $2`,
		worker.EmbedJobKind, store.UnclaimableKey).Scan(&blamed); err != nil {
		t.Fatal(err)
	}
	if blamed != 0 {
		t.Errorf("%d embed jobs marked unclaimable; want none blamed on their texts for a refused key", blamed)
	}
	if r := w.EmbedRefusing(); r != nil {
		t.Errorf("EmbedRefusing after the server answered: %+v, want nil", r)
	}
}
