package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// extractJobs lists the extraction jobs of e's schema through River's
// client, oldest first.
func (e *env) extractJobs() []*rivertype.JobRow {
	e.t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := client.JobList(e.ctx, river.NewJobListParams().Kinds(worker.ExtractJobKind).First(1000))
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Jobs
}

// TestEveryExtractionJobCarriesItsAttemptsAndQueue: the jobs that ingest,
// replay (with the worker's Enqueuer, and with one of its own as `replay
// --no-work` has) and retry-failed insert all carry the configured
// MaxAttempts, the extract queue and what enqueued them, so that River
// itself ends a job after the configured attempts.
func TestEveryExtractionJobCarriesItsAttemptsAndQueue(t *testing.T) {
	e := setup(t)
	const attempts = 3 // not the default
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.MaxAttempts = attempts })
	e.publish(events.Turn{ID: "alice-1", UserID: "alice", UserMessage: "I live in Lisbon."})
	e.waitDone(1)

	e.replay(worker.ReplayConfig{Enqueuer: w.Enqueuer()})
	own, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store, MaxAttempts: attempts})
	if err != nil {
		t.Fatal(err)
	}
	e.replay(worker.ReplayConfig{Enqueuer: own})

	// A failed turn, retried.
	e.failedTurn("alice-2")
	if n, _, err := own.RetryFailed(e.ctx, "alice", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v", n, err)
	}
	e.waitFor("the retried turn processed", func() (bool, string) {
		tu, err := e.store.GetTurn(e.ctx, "alice", "alice-2")
		return err == nil && tu.Status == store.StatusProcessed, fmt.Sprint(tu.Status, err)
	})

	sources := map[string]int{}
	for _, j := range e.extractJobs() {
		var meta struct {
			Source         string `json:"memoryd_source"`
			WorkerAttempts bool   `json:"memoryd_worker_attempts"`
		}
		_ = json.Unmarshal(j.Metadata, &meta)
		sources[meta.Source]++
		if j.MaxAttempts != attempts || j.Queue != worker.QueueExtract || meta.WorkerAttempts {
			t.Errorf("job %d from %q: max attempts %d, queue %q; want %d, %q", j.ID, meta.Source, j.MaxAttempts, j.Queue, attempts, worker.QueueExtract)
		}
	}
	if want := map[string]int{"ingest": 1, "replay": 2, "retry_failed": 1}; !maps.Equal(sources, want) {
		t.Errorf("jobs by source = %v, want %v", sources, want)
	}
}

// failedTurn records a failed turn of alice's, in one transaction, so that
// the reconciler never sees it pending without a job.
func (e *env) failedTurn(id string) { e.t.Helper(); e.failedTurnBecause(id, "boom") }

// failedTurnBecause records alice's turn id failed for good with reason.
func (e *env) failedTurnBecause(id, reason string) {
	e.t.Helper()
	err := e.store.InTx(e.ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, []store.Turn{recoverTurn(id, "alice")}); err != nil {
			return err
		}
		return q.MarkFailed(e.ctx, "alice", []string{id}, reason, true)
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// failingExtractor fails every extraction with a transient error and counts
// the calls.
type failingExtractor struct {
	calls atomic.Int64
}

func (f *failingExtractor) Extract(context.Context, extractor.Input) (extractor.Result, error) {
	f.calls.Add(1)
	return extractor.Result{}, errors.New("model unavailable")
}

func (f *failingExtractor) Info() extractor.Info { return extractor.Info{Name: "failing"} }

// TestJobsWithoutTheirAttemptsRunTheWorkers: a job an older memoryd enqueued
// for a replay or a retry-failed (River's default of 25 attempts, no mark of
// the Enqueuer), and a job of an Enqueuer that did not know the workers'
// MaxAttempts (retry-failed run as its own process), both run the worker's
// MaxAttempts and then fail their turns, as before jobs carried attempts.
func TestJobsWithoutTheirAttemptsRunTheWorkers(t *testing.T) {
	e := setup(t)
	jobs := e.recordTurns(recoverTurn("old", "alice")) // as older memoryd's insert-only clients did
	e.failedTurn("retried")
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v", n, err)
	}
	for _, j := range e.extractJobs() {
		if j.ID != jobs["old"] {
			jobs["retried"] = j.ID
		}
	}
	for id, job := range jobs {
		if j := e.jobRow(job); j.MaxAttempts != river.MaxAttemptsDefault {
			t.Fatalf("staged job of %s has %d attempts, want River's default %d", id, j.MaxAttempts, river.MaxAttemptsDefault)
		}
	}
	ext := &failingExtractor{}
	e.start(ext, func(c *worker.Config) { c.MaxAttempts = 2 })
	for id, job := range jobs {
		// The turn is marked failed before River records the job's end.
		e.waitFor(id+"'s job ended and its turn failed", func() (bool, string) {
			tu, err := e.store.GetTurn(e.ctx, "alice", id)
			j := e.jobRow(job)
			return err == nil && tu.Status == store.StatusFailed && j.FinalizedAt != nil, fmt.Sprint(tu.Status, err, j.State)
		})
		if j := e.jobRow(job); j.State != rivertype.JobStateCancelled || j.Attempt != 2 {
			t.Errorf("job of %s: %s after %d attempts; want cancelled after 2", id, j.State, j.Attempt)
		}
	}
	if n := ext.calls.Load(); n != 4 {
		t.Errorf("%d extractions, want 4 (2 jobs × 2 attempts)", n)
	}
}

// jobRow reads one job through River's client.
func (e *env) jobRow(id int64) *rivertype.JobRow {
	e.t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	j, err := client.JobGet(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func TestJobAttempts(t *testing.T) {
	for _, c := range []struct {
		name      string
		max       int
		meta      string
		workerMax int
		want      int
	}{
		{"enqueued: its own, below the worker's", 3, `{"memoryd_source":"ingest"}`, 5, 3},
		{"enqueued: its own, above the worker's", 7, `{"memoryd_source":"replay"}`, 5, 7},
		{"taken over: the attempts it had left", 2, `{"memoryd_source":"takeover","memoryd_replaces":9}`, 5, 2},
		{"older memoryd: River's default, capped", 25, `{}`, 5, 5},
		{"older memoryd: no metadata", 25, ``, 5, 5},
		{"older memoryd: lock waits only", 25, `{"memoryd_lock_waits":2}`, 4, 4},
		{"older memoryd: fewer than the worker's", 2, `{}`, 5, 2},
		{"unreadable metadata", 25, `[`, 5, 5},
		{"enqueued without the workers' attempts: the worker's", 25, `{"memoryd_source":"retry_failed","memoryd_worker_attempts":true}`, 2, 2},
		{"enqueued without the workers' attempts: within River's", 25, `{"memoryd_source":"replay","memoryd_worker_attempts":true}`, 30, 25},
	} {
		if got := worker.JobAttempts(c.max, []byte(c.meta), c.workerMax); got != c.want {
			t.Errorf("%s: jobAttempts(%d, %s, %d) = %d, want %d", c.name, c.max, c.meta, c.workerMax, got, c.want)
		}
	}
}

// TestExtractJobsShape: the field names the store's SQL on River's job table
// reads are ExtractArgs's JSON names.
func TestExtractJobsShape(t *testing.T) {
	b, err := json.Marshal(worker.ExtractArgs{UserID: "u", EventIDs: []string{"e"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	s := worker.ExtractJobs
	if s.Kind != (worker.ExtractArgs{}).Kind() || string(m[s.UserField]) != `"u"` || string(m[s.EventIDsField]) != `["e"]` {
		t.Fatalf("job shape %+v does not match ExtractArgs's JSON %s", s, b)
	}
}

// TestJobsAreStampedByPostgresClock: River stamps the jobs an Enqueuer
// inserts with the store's Clock (Postgres's time as the process reads
// it), not this host's: a walk saw every turn of a serve 90 s ahead wait
// 90 s, River stamping by the host and Postgres running jobs by its own
// clock. Here the clock reads Postgres an hour behind this host; the
// retried turn's job is stamped an hour before the host's time, and
// available now.
func TestJobsAreStampedByPostgresClock(t *testing.T) {
	e := setup(t)
	e.failedTurn("retried")
	sent := time.Now()
	e.store.Clock().Observe(sent, sent, sent.Round(0).Add(-time.Hour))
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v", n, err)
	}
	jobs := e.extractJobs()
	if len(jobs) != 1 {
		t.Fatalf("%d extraction jobs, want 1", len(jobs))
	}
	j := jobs[0]
	behind := time.Since(j.ScheduledAt)
	if j.State != rivertype.JobStateAvailable || behind < 59*time.Minute || behind > 61*time.Minute || !j.CreatedAt.Equal(j.ScheduledAt) {
		t.Fatalf("job %s, created %s, scheduled %s (%s before this host's time); want available, scheduled at its creation an hour before",
			j.State, j.CreatedAt, j.ScheduledAt, behind.Round(time.Second))
	}
}

// TestRetryFailedLeavesCrashedTurns: retry-failed leaves failed the turns
// the model server went down with (their error begins
// worker.CrashedReason) and says how many, unless asked to include them:
// each would bring the server down twice more. Before, a crash walk's
// retry-failed of 6 such turns with an outage's other failures brought
// the server down 11 times in 3 minutes.
func TestRetryFailedLeavesCrashedTurns(t *testing.T) {
	e := setup(t)
	e.failedTurn("outage")
	e.failedTurnBecause("poison", worker.CrashedReason+" 2 times: taken for a failure of the turn's own ...")
	if n, crashed, err := worker.RetryFailed(e.ctx, e.store, "", 10, false); err != nil || n != 1 || crashed != 1 {
		t.Fatalf("retry failed = %d re-enqueued, %d left for their crashes, %v; want 1 and 1", n, crashed, err)
	}
	failed, err := e.store.FailedTurns(e.ctx, "", 10)
	if err != nil || len(failed) != 1 || failed[0].EventID != "poison" {
		t.Fatalf("failed turns after the retry: %+v, %v; want the poison turn alone", failed, err)
	}
	if n, crashed, err := worker.RetryFailed(e.ctx, e.store, "", 10, true); err != nil || n != 1 || crashed != 0 {
		t.Fatalf("retry failed, crashed included = %d re-enqueued, %d left, %v; want 1 and 0", n, crashed, err)
	}
}

// TestRetryFailedReachesTurnsBehindCrashedOnes: the turns left failed for
// their crashes do not use up --limit. FailedTurns reads the oldest failed
// turns first, so when they were crashed ones, filtering them after the
// read re-enqueued nothing, run after run, and the turns behind them were
// never retried.
func TestRetryFailedReachesTurnsBehindCrashedOnes(t *testing.T) {
	e := setup(t)
	e.failedTurnBecause("poison", worker.CrashedReason+" 2 times: taken for a failure of the turn's own ...")
	e.failedTurn("outage")
	if n, crashed, err := worker.RetryFailed(e.ctx, e.store, "", 1, false); err != nil || n != 1 {
		t.Fatalf("retry failed --limit 1 = %d re-enqueued, %d left for their crashes, %v; want the outage's turn re-enqueued", n, crashed, err)
	}
	failed, err := e.store.FailedTurns(e.ctx, "", 10)
	if err != nil || len(failed) != 1 || failed[0].EventID != "poison" {
		t.Fatalf("failed turns after the retry: %+v, %v; want the poison turn alone", failed, err)
	}
}
