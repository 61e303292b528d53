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
