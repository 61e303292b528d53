package worker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestBurstSplitsForInvalidRepliesOnly: a conversation's burst whose
// request first meets a failure that says nothing of the burst (a 429, a
// server down), then invalid replies, then valid ones, is extracted by
// its third request: it is not sent one a request, which a second attempt
// with invalid replies would do. Each case counts the model's calls (the
// burst's: one, two for the invalid reply and its correction, one; none
// for a turn alone), the turns' end (processed) and the burst job's in
// River (completed, with the attempts the failures spent).
func TestBurstSplitsForInvalidRepliesOnly(t *testing.T) {
	for _, c := range []struct {
		name  string
		first extractortest.Reply
		cfg   func(*worker.Config)
		// errors is how many of the job's runs spent an attempt (River's
		// errors): a snooze spends none.
		errors int
	}{
		// A snooze, free: no attempt, nothing recorded on the turns.
		{name: "429", first: extractortest.Error(http.StatusTooManyRequests, "slow down"), errors: 1},
		{name: "503 within --llm-max-outage", first: extractortest.Error(http.StatusServiceUnavailable, "loading model"), errors: 1},
		// An attempt spent, and recorded on the turns: before, a turn's
		// recorded attempt of any kind split the burst at its next
		// invalid replies (at the second attempt here: 3 calls for the
		// burst, one for each turn).
		{name: "500", first: extractortest.Error(http.StatusInternalServerError, "boom"), errors: 2},
		{name: "503 past --llm-max-outage", first: extractortest.Error(http.StatusServiceUnavailable, "loading model"),
			cfg: func(c *worker.Config) { c.MaxModelOutage = -1 }, errors: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			const garbage = "I am sorry, I can only answer in prose."
			llm, batchCalls, turnCalls := burstOfThreeReplies(t, e, extractor.LLMConfig{MaxProbeGap: -1}, func(n int64) extractortest.Reply {
				switch n {
				case 1:
					return c.first
				case 2, 3: // an attempt's reply and its correction
					return extractortest.Content(garbage)
				}
				return extractortest.Content(`{"facts":[{"turn":1,"key":"name","value":"Alice"}],"context":[]}`)
			})
			e.start(llm, func(cfg *worker.Config) {
				cfg.MaxAttempts = 5
				if c.cfg != nil {
					c.cfg(cfg)
				}
			})
			burstProcessed(t, e)
			if b, o := batchCalls.Load(), turnCalls.Load(); b != 4 || o != 0 {
				t.Errorf("calls: %d for the burst, %d for its turns; want 4 (the failure, the invalid reply and its correction, the valid reply), 0", b, o)
			}
			checkBurstJob(t, e, c.errors, 3) // none for a turn alone
		})
	}
}

// checkBurstJob checks that burstOfThree's burst job (b0's) completed
// after errors attempts that failed, and that there are wantJobs
// extraction jobs: the burst's turns' 3, and one for each turn a split
// sent alone.
func checkBurstJob(t *testing.T, e *env, errors, wantJobs int) {
	t.Helper()
	var (
		b0   *rivertype.JobRow
		jobs []*rivertype.JobRow
	)
	// River records a job's end after the run has stored its turns.
	e.waitFor("b0's job to end", func() (bool, string) {
		jobs = e.extractJobs()
		var desc string
		for _, j := range jobs {
			var args worker.ExtractArgs
			if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
				return false, err.Error()
			}
			if slices.Contains(args.EventIDs, "b0") {
				b0 = j
			}
			desc += fmt.Sprintf("job %d %s: %s, attempt %d, %d errors; ", j.ID, j.EncodedArgs, j.State, j.Attempt, len(j.Errors))
		}
		return b0 != nil && b0.FinalizedAt != nil, desc
	})
	if b0.State != rivertype.JobStateCompleted || len(b0.Errors) != errors {
		t.Errorf("b0's job: %s after %d failed attempts, want completed after %d", b0.State, len(b0.Errors), errors)
	}
	if len(jobs) != wantJobs {
		t.Errorf("%d extraction jobs, want %d", len(jobs), wantJobs)
	}
}
