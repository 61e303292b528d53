package worker_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestEmbedGiveUpOnRefusedTextsSaysTheyAreLeftOut: an embed job whose
// only text the server refuses as input (alone and by every start) gives
// up, and its line says the text is recorded as refused, left out by the
// sweep and a backfill until --retry-refused, at warn. Before, it was an
// error saying "the hourly embed sweep enqueues them again, or run memoryd
// embed --backfill once the cause is fixed", neither of which sends it (an
// operations walk: the backfill then said the item was left out).
func TestEmbedGiveUpOnRefusedTextsSaysTheyAreLeftOut(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.FailContaining("LONG", http.StatusInternalServerError)
	srv.ErrorBody(llamaTooLarge)
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "alice", Question: "a pasted log",
		Answer: "LONG " + strings.Repeat("a pasted paragraph ", 400), CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	if _, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 3); err != nil {
		t.Fatal(err)
	}
	e.waitEmbedJobsOver()
	if c, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || c.Refused != 1 {
		t.Fatalf("count %+v (%v), want the item refused", c, err)
	}
	var found bool
	for l := range strings.Lines(logs.String()) {
		var line struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &line) != nil || !strings.HasPrefix(line.Msg, "embedding failed") {
			continue
		}
		found = true
		if line.Level != "WARN" || strings.Contains(line.Msg, "enqueues them again") || !strings.Contains(line.Msg, "--retry-refused") {
			t.Errorf("the job's line: %s %q; want a warning saying the text is recorded as refused and --retry-refused", line.Level, line.Msg)
		}
	}
	if !found {
		t.Errorf("no line of the job's give-up in\n%s", logs.String())
	}
}
