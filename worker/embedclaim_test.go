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

// userIDs is n user ids, u00 on.
func userIDs(n int) []string {
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
	}
	return users
}

// enqueueSmallEmbedJobs stores two items for each user and enqueues one
// embed job of model per item, as live ingest leaves them: a backlog of
// small jobs, waiting before any worker runs.
func (e *env) enqueueSmallEmbedJobs(model string, users ...string) {
	e.t.Helper()
	e.enqueueSmallEmbedJobsWith(5, model, users...)
}

// enqueueSmallEmbedJobsWith is enqueueSmallEmbedJobs with attempts
// attempts a job.
func (e *env) enqueueSmallEmbedJobsWith(attempts int, model string, users ...string) {
	e.t.Helper()
	e.logEmbedJobsOnFailure()
	e.seedItems(users...)
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		e.t.Fatal(err)
	}
	if n, err := enq.EnqueueMissingEmbeddings(e.ctx, "", model, 1, attempts); err != nil || n != 2*len(users) {
		e.t.Fatalf("enqueued %d items (%v), want %d", n, err, 2*len(users))
	}
}

// enqueueEmbedJobsOf enqueues an embed job of model for each of user's
// items that lack a vector, one item a job, five attempts each.
func (e *env) enqueueEmbedJobsOf(user, model string) {
	e.t.Helper()
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := enq.EnqueueMissingEmbeddings(e.ctx, user, model, 1, 5); err != nil {
		e.t.Fatal(err)
	}
}

// unclaimableJobs counts the embed jobs marked unclaimable.
func (e *env) unclaimableJobs() int {
	e.t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND metadata ? $2`,
		worker.EmbedJobKind, store.UnclaimableKey).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// waitHeldOnce waits until at least n embed jobs have been held back
// once by the server's failure: failed (an attempt spent), or snoozed
// waiting for a server that is down. Not "fetched once" (attempt > 0):
// River gives a snoozed job its attempt back, so that counted the jobs
// running at the moment it looked, and a loaded machine missed 24.
func (e *env) waitHeldOnce(n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d jobs held back once", n), func() (bool, string) {
		var held int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND coalesce(array_length(errors, 1), 0) + coalesce((metadata->>'memoryd_model_waits')::int, 0) > 0`, worker.EmbedJobKind).Scan(&held)
		return err == nil && held >= n, fmt.Sprint(held, err)
	})
}

// checkNoAttemptSpent fails the test for each embed job that spent an
// attempt: the server being down is no job's fault, and waiting for it
// costs none.
func (e *env) checkNoAttemptSpent(during string) {
	e.t.Helper()
	for _, r := range e.embedJobRows() {
		if r.errors != 0 {
			e.t.Errorf("embed job %d spent %d attempts during %s (last %q); waiting for the server spends none", r.id, r.errors, during, r.lastError)
		}
	}
}

// logEmbedJobsOnFailure logs, when the test fails, the embed jobs that
// did not complete: where a batch stopped (claimed, released, retrying)
// is what a failure under load needs.
func (e *env) logEmbedJobsOnFailure() {
	e.t.Cleanup(func() {
		if !e.t.Failed() {
			return
		}
		for _, r := range e.embedJobRows() {
			if r.state != "completed" {
				e.t.Logf("embed job %d: %s, %d errors (last %q), claimed by %q, items %q", r.id, r.state, r.errors, r.lastError, r.claimedBy, r.text)
			}
		}
	})
}

// waitJobEnded waits until job id is completed, cancelled or discarded,
// and returns which.
func (e *env) waitJobEnded(id int64) string {
	e.t.Helper()
	var state string
	e.waitFor(fmt.Sprintf("job %d ended", id), func() (bool, string) {
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text FROM river_job WHERE id = $1`, id).Scan(&state)
		return err == nil && slices.Contains([]string{"completed", "cancelled", "discarded"}, state), fmt.Sprint(state, err)
	})
	return state
}

// waitEmbedJobsEnded waits until every embed job has ended (completed,
// cancelled or discarded) but those whose items' text holds skip (none
// when skip is ""): River ends a job after its run returns, apart from
// the vectors the run saved.
func (e *env) waitEmbedJobsEnded(skip string) {
	e.t.Helper()
	e.waitFor("the embed jobs ended", func() (bool, string) {
		for _, r := range e.embedJobRows() {
			if (skip == "" || !strings.Contains(r.text, skip)) && slices.Contains([]string{"available", "running", "retryable", "scheduled"}, r.state) {
				return false, fmt.Sprintf("%+v", r)
			}
		}
		return true, ""
	})
}

// checkStillBatching waits until each of users has its two items
// embedded, then checks that no embed job was marked to run alone and
// that the server answered at most max requests with vectors: the
// backlog went in batches after a failure (after says which).
func (e *env) checkStillBatching(srv *embeddingtest.Server, users []string, max int, after string) {
	e.t.Helper()
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	if n := e.unclaimableJobs(); n != 0 {
		e.t.Errorf("%d jobs marked to run alone %s", n, after)
	}
	if n := len(srv.Batches()); n > max {
		e.t.Errorf("%d requests answered with vectors for %d one-item jobs %s, want a few batches", n, 2*len(users), after)
	}
}

// batchesHolding counts the requests of several texts the server got
// that held text.
func batchesHolding(srv *embeddingtest.Server, text string) int {
	n := 0
	for _, in := range srv.Sent() {
		if len(in) > 1 && slices.ContainsFunc(in, func(s string) bool { return strings.Contains(s, text) }) {
			n++
		}
	}
	return n
}

// embedJobRow is an embed job's state, errors and claimer.
type embedJobRow struct {
	id        int64
	state     string
	errors    int
	claimedBy string
	text      string // its items' question and answer
	lastError string
}

func (e *env) embedJobRows() []embedJobRow {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT j.id, j.state::text, coalesce(array_length(j.errors, 1), 0), coalesce(j.metadata->>$2, ''),
			coalesce((SELECT string_agg(c.question || E'\n' || c.answer, ' ') FROM context c WHERE c.id IN (SELECT jsonb_array_elements_text(j.args->'context_ids')::bigint)), ''),
			coalesce(j.errors[array_upper(j.errors, 1)]->>'error', '')
		FROM river_job j WHERE j.kind = $1 ORDER BY j.id`, worker.EmbedJobKind, store.ClaimedByKey)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []embedJobRow
	for rows.Next() {
		var r embedJobRow
		if err := rows.Scan(&r.id, &r.state, &r.errors, &r.claimedBy, &r.text, &r.lastError); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A backlog of one-item embed jobs (one per write, as live ingest leaves
// them) is embedded in a few requests of many texts: a running job claims
// waiting ones up to its size and completes them with its own. Every text
// is sent once, every job ends completed, and each user's vectors are of
// the user's own texts, with two worker processes at work. Before, each job
// sent its own request.
func TestEmbedJobsClaimWaitingJobs(t *testing.T) {
	e := setup(t)
	users := userIDs(30)
	e.enqueueSmallEmbedJobs("m1", users...)
	srv := embeddingtest.New(t)
	// Two worker processes, so that claims race River's fetches and each
	// other's.
	for range 2 {
		e.start(extractor.NewRules(), func(c *worker.Config) {
			withEmbedder(embedder(t, srv, "m1"), -1)(c)
			c.EmbedJobSize = 32
		})
	}
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	e.waitFor("every embed job completed", func() (bool, string) {
		rows := e.embedJobRows()
		return !slices.ContainsFunc(rows, func(r embedJobRow) bool { return r.state != "completed" }), fmt.Sprintf("%+v", rows)
	})
	sent := srv.Sent()
	var texts []string
	for _, in := range sent {
		texts = append(texts, in...)
		if len(in) > 32 {
			t.Errorf("a request of %d texts, over the job size 32", len(in))
		}
	}
	if len(texts) != 60 || len(slices.Compact(slices.Sorted(slices.Values(texts)))) != 2 {
		// seedItems gives every user the same two texts.
		t.Errorf("%d texts sent, want each of the 60 items once", len(texts))
	}
	// 60 items, 32 a job: two requests when each fetched job claims a full
	// batch; a few more when the processes' River fetched several jobs at
	// once.
	if len(sent) > 8 {
		t.Errorf("%d requests for 60 items in one-item jobs, want a few batches", len(sent))
	}
	claimed := 0
	for _, r := range e.embedJobRows() {
		if r.claimedBy != "" {
			claimed++
		}
	}
	if claimed < 40 {
		t.Errorf("%d of 60 jobs were claimed by another, want most", claimed)
	}
	for _, u := range users {
		e.checkVectors(u, "m1", embeddingtest.DefaultDims)
	}
}

// A text that makes the server fail a whole request (not a refusal of the
// input, which embedTexts isolates by halving) fails one batch at most
// (sent twice: again once the server embedded a control text):
// the jobs its claimer took are given back to run alone and get their
// vectors, and the failing job neither claims again nor is claimed; it
// alone keeps failing.
func TestEmbedFailedBatchRunsClaimedJobsAlone(t *testing.T) {
	e := setup(t)
	users := userIDs(12)
	e.enqueueSmallEmbedJobs("m1", users...)
	// One more user whose items' texts make the server fail.
	if _, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "zed", Question: "poison pill", Answer: "boom", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	e.enqueueEmbedJobsOf("zed", "m1")
	srv := embeddingtest.New(t)
	srv.FailContaining("poison", http.StatusInternalServerError)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.EmbedMaxAttempts = 5
	})
	for _, u := range users {
		e.waitEmbedded(u, "m1", 2)
	}
	e.waitFor("the failing job retried alone", func() (bool, string) {
		for _, r := range e.embedJobRows() {
			if strings.Contains(r.text, "poison") {
				return r.errors >= 2, fmt.Sprintf("%+v", r)
			}
		}
		return false, "no job of the poison item"
	})
	batchesWithPoison := batchesHolding(srv, "poison")
	// The batch, and the same batch once more after the server embedded a
	// control text.
	if batchesWithPoison > 2 {
		t.Errorf("the failing text was in %d requests of several texts, want 2 at most", batchesWithPoison)
	}
	// River completes a job after its run returns, apart from the vectors
	// the run saved.
	e.waitEmbedJobsEnded("poison")
	for _, r := range e.embedJobRows() {
		switch {
		case strings.Contains(r.text, "poison"):
			if r.state == "completed" {
				t.Errorf("the failing item's job completed: %+v", r)
			}
		case r.state != "completed" || r.errors > 1:
			// Its claimer's failure is one error at most.
			t.Errorf("job %d: state %s, %d errors: want completed, after one failed batch at most", r.id, r.state, r.errors)
		}
	}
	if n, _ := e.store.CountEmbeddings(e.ctx, "zed", "m1"); n.Embedded != 0 {
		t.Errorf("the failing item has a vector: %+v", n)
	}
}
