package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
)

// TestEmbedHalvesOfOtherDimensions: a job whose batch was halved (one text
// refused) saves no vector of other dimensions than the model's recorded
// ones when the server's halves come back in two sizes (the model behind
// the name changed between them). Before, only the first vector was
// checked: the job completed with vectors of both sizes stored under the
// name, and every query of the other size read them (an adversarial
// review, against a fake server flipping its dimensions).
func TestEmbedHalvesOfOtherDimensions(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	srv.RefuseContaining("POISON")
	items := aliceNotes(8)
	items[5].Answer = "POISON"
	if _, err := e.store.InsertContext(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	srv.AlternateDims(embeddingtest.DefaultDims / 2)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if n, err := w.Enqueuer().EnqueueMissingEmbeddings(e.ctx, "alice", "m1", 64, 1); err != nil || n != 8 {
		t.Fatalf("backfill enqueued %d items (%v), want 8 in one job", n, err)
	}
	// Its first attempt ends: with an error naming the two sizes, or
	// completed, as before the fix.
	var states, errs []string
	e.waitFor("the embed job's first attempt", func() (bool, string) {
		states, errs = e.embedJobs()
		return len(states) == 1 && (states[0] == "completed" || errs[0] != ""), fmt.Sprint(states, errs)
	})
	var other int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM context_embeddings e
		JOIN embedding_models m ON m.model = e.model WHERE e.model = 'm1' AND e.dims <> m.dims`).Scan(&other); err != nil {
		t.Fatal(err)
	}
	if other != 0 || !strings.Contains(errs[0], "answered the requests of one job with vectors of") {
		t.Fatalf("%d vectors of m1 stored with other dimensions than the recorded ones; job %s, error %q", other, states[0], errs[0])
	}
	if n, err := e.store.CountEmbeddings(e.ctx, "alice", "m1"); err != nil || n.Embedded != 0 {
		t.Fatalf("%+v (%v): vectors saved from a job answered in two sizes", n, err)
	}
}
