package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// panickingBatcher extracts turns one a request with its rules, and
// panics on the first batches (a burst's request), counting them.
type panickingBatcher struct {
	*extractor.Rules
	panics  int64 // how many batches panic; the later ones are extracted
	batches atomic.Int64
	// panicked is how many turns the last batch that panicked held.
	panicked atomic.Int64
}

func (p *panickingBatcher) ExtractBatch(ctx context.Context, in extractor.BatchInput) (extractor.BatchResult, error) {
	if p.batches.Add(1) <= p.panics {
		p.panicked.Store(int64(len(in.Turns)))
		panic("batch extraction bug")
	}
	return p.Rules.ExtractBatch(ctx, in)
}

// TestPanickingBurstLeavesNoTurnClaimed: a debounced burst's job that
// panics leaves none of the burst's turns claimed by it. At its last
// attempt its own turn fails (as before) and each other turn of the burst
// gets a job of its own at once, which extracts it; before its last, its
// claims are released as an error's are, so a new turn's burst takes the
// turns along rather than leave them to the job's retry. Before, the
// claims lasted their TTL (--job-timeout, 10 minutes): the burst's other
// turns, whose own jobs had ended on finding them claimed, stayed pending
// that long and a reconcile more, and a new turn's burst left them.
func TestPanickingBurstLeavesNoTurnClaimed(t *testing.T) {
	t.Run("last attempt", func(t *testing.T) {
		e := setup(t)
		ext := &panickingBatcher{Rules: extractor.NewRules(), panics: 1}
		// Published before the worker starts: one ingest batch, the
		// burst's jobs due at once, so that the first claims them all.
		ids := e.publishBurst("c1")
		start := time.Now()
		e.startWorker(ext, func(c *worker.Config) {
			c.ExtractDebounce = 50 * time.Millisecond
			c.MaxAttempts = 1
		})
		st := e.waitDone(3)
		t.Logf("figures: the burst's turns done %v after the worker's start", time.Since(start).Round(10*time.Millisecond))
		failed, err := e.store.FailedTurns(e.ctx, "alice", 10)
		if err != nil {
			t.Fatal(err)
		}
		if st.TurnsProcessed != 2 || len(failed) != 1 || !strings.Contains(failed[0].LastError, "panicked") {
			t.Fatalf("stats %+v, failed %+v; want the panicking job's turn failed, the burst's 2 others processed", st, failed)
		}
		// The burst's other turns are extracted by the jobs they are given,
		// or by the job of one of them when it runs after the panic.
		if n := ext.panicked.Load(); n != 3 {
			t.Fatalf("the batch that panicked held %d turns; want the burst's 3", n)
		}
		var claimed int
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE event_id = ANY($1) AND claimed_until IS NOT NULL`, ids).Scan(&claimed); err != nil || claimed != 0 {
			t.Fatalf("%d turns still claimed (%v); want none", claimed, err)
		}
	})
	t.Run("before the last attempt", func(t *testing.T) {
		e := setup(t)
		ext := &panickingBatcher{Rules: extractor.NewRules(), panics: 1}
		for i, msg := range []string{"I have a cat.", "Its name is Tom."} {
			e.publish(events.Turn{ID: fmt.Sprintf("t%d", i+1), UserID: "alice", ConversationID: "c1", UserMessage: msg,
				AssistantResponse: "ok", Timestamp: t0.Add(time.Duration(i) * time.Second)})
		}
		// The panicking job's retry comes minutes later, after the test.
		e.startWorker(ext, func(c *worker.Config) {
			c.ExtractDebounce = 50 * time.Millisecond
			c.MaxAttempts = 2
			c.JobRetryBase = 5 * time.Minute
		})
		e.waitFor("the burst's job to panic and wait for its retry", func() (bool, string) {
			var states []string
			for _, j := range e.extractJobs() {
				states = append(states, string(j.State))
				if j.State == rivertype.JobStateRetryable {
					return true, ""
				}
			}
			return false, fmt.Sprintf("jobs %v, %d batches", states, ext.batches.Load())
		})
		start := time.Now()
		e.publish(events.Turn{ID: "t3", UserID: "alice", ConversationID: "c1", UserMessage: "I live in Oslo.",
			AssistantResponse: "ok", Timestamp: t0.Add(time.Minute)})
		st := e.waitDone(3)
		t.Logf("figures: the panicked burst's turns done %v after a new turn's publish", time.Since(start).Round(10*time.Millisecond))
		// By the new turn's burst, or by the job of the burst's other
		// turn when it ran after the panic: not by the panicked job's
		// retry, minutes later.
		if st.TurnsProcessed != 3 || ext.panicked.Load() != 2 {
			t.Fatalf("stats %+v after %d batch requests, the one that panicked of %d turns; want the 3 turns processed after a panic of the burst's 2", st, ext.batches.Load(), ext.panicked.Load())
		}
		for _, id := range []string{"t1", "t2"} {
			if turn, err := e.store.GetTurn(e.ctx, "alice", id); err != nil || turn.Status != store.StatusProcessed {
				t.Fatalf("turn %s = %+v, %v; want it processed", id, turn, err)
			}
		}
	})
}
