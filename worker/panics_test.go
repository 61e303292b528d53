package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// panickingExtractor panics on every call, counting them.
type panickingExtractor struct {
	*extractor.Rules
	calls atomic.Int64
}

func (p *panickingExtractor) Extract(context.Context, extractor.Input) (extractor.Result, error) {
	p.calls.Add(1)
	panic("extractor bug")
}

// TestPanicOnTheLastAttemptFailsTheTurns: a job whose extraction panics
// every time runs its attempts and no more, then ends cancelled with its
// turn marked failed (listed by `memoryd failed`), as an error would. That
// holds for a job that runs the worker's attempts too (retry-failed from a
// process without workers: River's row says 25), which River alone would
// re-run 25 times.
func TestPanicOnTheLastAttemptFailsTheTurns(t *testing.T) {
	e := setup(t)
	ext := &panickingExtractor{Rules: extractor.NewRules()}
	e.startWorker(ext, func(c *worker.Config) { c.MaxAttempts = 2 })
	e.publish(events.Turn{ID: "p1", UserID: "alice", UserMessage: "I live in Lisbon."})

	e.waitFor("the panicking turn to be marked failed", func() (bool, string) {
		failed, err := e.store.FailedTurns(e.ctx, "alice", 10)
		if err != nil {
			return false, err.Error()
		}
		return len(failed) == 1 && strings.Contains(failed[0].LastError, "panicked"), fmt.Sprintf("failed turns %+v", failed)
	})
	var jobs []*rivertype.JobRow
	e.waitFor("River to cancel the job", func() (bool, string) {
		jobs = e.extractJobs()
		return len(jobs) == 1 && jobs[0].State == rivertype.JobStateCancelled, fmt.Sprintf("jobs %+v", jobs)
	})
	if got := ext.calls.Load(); got != 2 {
		t.Fatalf("extractor called %d times, want 2 (MaxAttempts)", got)
	}

	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v", n, err)
	}
	e.waitFor("the retried job to be cancelled", func() (bool, string) {
		jobs = e.extractJobs()
		return len(jobs) == 2 && jobs[1].State == rivertype.JobStateCancelled, fmt.Sprintf("jobs %+v", jobs)
	})
	if jobs[1].MaxAttempts <= 2 {
		t.Fatalf("the retried job carries MaxAttempts %d; this test needs River's default", jobs[1].MaxAttempts)
	}
	if got := ext.calls.Load(); got != 4 {
		t.Fatalf("extractor called %d times in all, want 4 (2 attempts per job)", got)
	}
}

// panickingOnceExtractor panics on its first call and extracts with its
// rules after, counting the calls.
type panickingOnceExtractor struct {
	*extractor.Rules
	calls atomic.Int64
}

func (p *panickingOnceExtractor) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	if p.calls.Add(1) == 1 {
		panic("extractor bug")
	}
	return p.Rules.Extract(ctx, in)
}

// TestPanicBeforeTheLastAttemptIsRetried: a panic on an attempt that is
// not the job's last is left to River, which retries the job: the turn
// is extracted at the second attempt, not marked failed, and the job
// completes with the panic as its one error.
func TestPanicBeforeTheLastAttemptIsRetried(t *testing.T) {
	e := setup(t)
	ext := &panickingOnceExtractor{Rules: extractor.NewRules()}
	e.startWorker(ext, func(c *worker.Config) { c.MaxAttempts = 2 })
	e.publish(events.Turn{ID: "p1", UserID: "alice", UserMessage: "I live in Lisbon."})
	if st := e.waitDone(1); st.TurnsProcessed != 1 {
		t.Fatalf("stats %+v, want the turn processed at the retry", st)
	}
	var jobs []*rivertype.JobRow
	e.waitFor("River to end the job", func() (bool, string) {
		jobs = e.extractJobs()
		return len(jobs) == 1 && jobs[0].FinalizedAt != nil, fmt.Sprintf("jobs %+v", jobs)
	})
	if j := jobs[0]; j.State != rivertype.JobStateCompleted || j.Attempt != 2 || len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Error, "extractor bug") {
		t.Errorf("job %s at attempt %d with errors %+v; want completed at its second attempt, the panic its one error", j.State, j.Attempt, j.Errors)
	}
	if got := ext.calls.Load(); got != 2 {
		t.Errorf("extractor called %d times, want 2", got)
	}
}
