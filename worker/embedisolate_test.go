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

// seedOneJob stores texts as items of user and enqueues one embed job of
// them all, as the sweep or a backfill makes it, with attempts attempts.
func (e *env) seedOneJob(user string, attempts int, texts ...string) int64 {
	e.t.Helper()
	var writes []store.ContextWrite
	for _, q := range texts {
		writes = append(writes, store.ContextWrite{UserID: user, Question: q, CreatedAt: t0})
	}
	if _, err := e.store.InsertContext(e.ctx, writes); err != nil {
		e.t.Fatal(err)
	}
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		e.t.Fatal(err)
	}
	if n, err := enq.EnqueueMissingEmbeddings(e.ctx, user, "m1", 64, attempts); err != nil || n != len(texts) {
		e.t.Fatalf("enqueued %d items (%v), want %d", n, err, len(texts))
	}
	var job int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT max(id) FROM river_job WHERE kind = $1`, worker.EmbedJobKind).Scan(&job); err != nil {
		e.t.Fatal(err)
	}
	return job
}

// A text that makes the server fail a whole request (a 500 for that text,
// not a refusal of its input) costs that text alone, not the other items
// of its job: once the job has failed so (it is then suspected), its
// retry halves the batch to find the text, saves the others' vectors, and
// is retried for that text alone until its attempts run out. Before, the
// retry sent the same batch, and so did every sweep and backfill after
// the job gave up: the offline extractor writes up to 50 items in one job
// and a sweep 64, none of which ever got a vector (found by an operator's
// walk: 19 items sharing a job with the failing text, with `embed
// --backfill` never ending).
func TestEmbedFailingTextSparesItsJobsOtherItems(t *testing.T) {
	e := setup(t)
	e.logEmbedJobsOnFailure()
	texts := []string{"apples are red", "bananas are yellow", "poison pill", "cherries are dark", "dates are sweet", "figs are soft"}
	job := e.seedOneJob("zed", 3, texts...)
	srv := embeddingtest.New(t)
	srv.FailContaining("poison", http.StatusInternalServerError)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitFor("the five items without the failing text embedded", func() (bool, string) {
		n, err := e.store.CountEmbeddings(e.ctx, "zed", "m1")
		return err == nil && n.Embedded == int64(len(texts)-1), fmt.Sprintf("%+v %v", n, err)
	})
	// The job is retried for the failing text alone, not completed as if
	// it were refused: the 500 may be the server's passing trouble.
	if state := e.waitJobEnded(job); state == "completed" {
		t.Errorf("job %d completed with an item the server failed on: nothing would retry it before the sweep", job)
	}
	var withPoison, alone int
	for _, in := range srv.Sent() {
		if slices.ContainsFunc(in, func(s string) bool { return strings.Contains(s, "poison") }) {
			withPoison++
			if len(in) == 1 {
				alone++
			}
		}
	}
	// The first attempt's batch, sent again once the server embedded a
	// control text, the second's batch and its halving (a probe, then
	// log2(6) levels), and the third attempt's one text.
	if withPoison > 8 || alone < 2 {
		t.Errorf("the failing text was in %d requests, %d of them alone: %q", withPoison, alone, srv.Sent())
	}
}

// A text the server failed on for a while (a 500 that was the server's,
// not the text's) gets its vector on the job's retry once the server
// recovers: isolating it left it to the job's attempts, not to the hourly
// sweep. A review found the first version completing the job with the
// item left out, as if the server had refused it.
func TestEmbedTextFailedForAWhileGetsItsVector(t *testing.T) {
	e := setup(t)
	e.logEmbedJobsOnFailure()
	texts := []string{"apples are red", "bananas are yellow", "a flaky text", "cherries are dark"}
	job := e.seedOneJob("zed", 5, texts...)
	// Suspected already, so that its first run isolates.
	e.exec(`UPDATE river_job SET metadata = metadata || jsonb_build_object($2::text, true) WHERE id = $1`, job, store.UnclaimableKey)
	srv := embeddingtest.New(t)
	srv.FailContaining("flaky", http.StatusInternalServerError)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitFor("the three other items embedded", func() (bool, string) {
		n, err := e.store.CountEmbeddings(e.ctx, "zed", "m1")
		return err == nil && n.Embedded == int64(len(texts)-1), fmt.Sprintf("%+v %v", n, err)
	})
	srv.Recover()
	if state := e.waitJobEnded(job); state != "completed" {
		t.Errorf("job %d ended %s, want completed once the server answered the text", job, state)
	}
	if n, err := e.store.CountEmbeddings(e.ctx, "zed", "m1"); err != nil || n.Embedded != int64(len(texts)) {
		t.Errorf("after the server recovered: %+v (%v), want every item embedded", n, err)
	}
}

// A suspected job whose server fails every request (an overloaded server,
// as some answer with a 500) is not halved down to every text: the
// probes of its shortest and longest text fail too, and the attempt ends
// after three requests.
func TestEmbedServerFailingEveryRequestIsNotHalved(t *testing.T) {
	e := setup(t)
	e.logEmbedJobsOnFailure()
	texts := []string{"apples are red", "bananas are yellow", "cherries are dark", "dates are sweet", "figs are soft", "grapes are small", "kiwis are green", "limes are sour"}
	job := e.seedOneJob("zed", 5, texts...)
	e.exec(`UPDATE river_job SET metadata = metadata || jsonb_build_object($2::text, true) WHERE id = $1`, job, store.UnclaimableKey)
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusInternalServerError, "")
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitFor("the job failed once", func() (bool, string) {
		var errs int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, job).Scan(&errs)
		return err == nil && errs >= 1, fmt.Sprint(errs, err)
	})
	sent := srv.Sent()
	if len(sent) > 3 && len(sent[3]) < len(texts) {
		// Anything past the third request is the next attempt's batch.
		t.Errorf("the failing attempt sent %d requests (%v), want the batch and two probes", len(sent), sent)
	}
}
