package worker_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestRetryFailedRightAfterTheFix: with no waiting for the model server
// (--llm-max-outage negative) and one attempt a job, the turns an outage
// failed, retried with retry-failed just after the server is fixed, are
// extracted. Found by a newcomer's walk: the running process still
// counted the server as down until its next probe, held the retried
// requests back unsent, and spent their one attempt on that, failing
// them again with the server up. A request held back is not sent, so it
// spends no attempt (a few times a job): it waits for the probe. And the
// server still down gets no more requests for it: retried while it is,
// the turns fail again at the probes' pace, not with a request each.
func TestRetryFailedRightAfterTheFix(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var up atomic.Bool
	gate := make(chan struct{})
	var blocked atomic.Int64
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		if !up.Load() {
			return extractortest.Error(http.StatusServiceUnavailable, "loading model")
		}
		// Fixed: the first requests are held in flight until the test has
		// seen what the others' jobs did meanwhile.
		blocked.Add(1)
		<-gate
		return extractortest.Content(`{"facts":[{"op":"set","key":"name","value":"Alice"}],"context":[]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", MaxProbeGap: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) {
		c.MaxModelOutage = -1
		c.MaxAttempts = 1
		c.Workers = 8
	})

	// The outage: turns come until the process holds requests back, at
	// least minTurns of them.
	const minTurns = 16
	turns := 0
	e.waitFor("a request held back", func() (bool, string) {
		if held, state := e.heldBack(); held > 0 && turns >= minTurns {
			return true, state
		}
		e.publish(events.Turn{ID: fmt.Sprint("t", turns), UserID: fmt.Sprint("user-", turns), UserMessage: "My name is Alice."})
		turns++
		return false, fmt.Sprintf("%d turns published", turns)
	})
	if st := e.waitDone(int64(turns)); st.TurnsFailed != int64(turns) {
		t.Fatalf("stats %+v; want all %d turns failed in the outage", st, turns)
	}

	// Retried while the server is still down: they fail again, the
	// server asked by probes, not by every job.
	from := srv.Requests()
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "", 1000, true); err != nil || n != turns {
		t.Fatalf("retry failed: %d, %v; want %d", n, err, turns)
	}
	e.waitFor("the retried turns failed again", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "")
		if err != nil {
			return false, err.Error()
		}
		return st.TurnsFailed == int64(turns), fmt.Sprintf("%+v", st)
	})
	sent := srv.Requests() - from
	t.Logf("%d turns retried with the server down: %d requests", turns, sent)
	if sent > turns/2 {
		t.Errorf("%d turns retried while the server was down sent it %d requests; want them held back for its probes", turns, sent)
	}

	// Fixed, and retried at once.
	up.Store(true)
	lastJob := e.lastExtractJob()
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "", 1000, true); err != nil || n != turns {
		t.Fatalf("retry failed: %d, %v; want %d", n, err, turns)
	}
	// Every retried job ended, snoozed (River counts a snooze in its
	// metadata), or at the server.
	e.waitFor("the retried jobs run", func() (bool, string) {
		settled := int(blocked.Load())
		for _, j := range e.extractJobs() {
			var meta map[string]any
			_ = json.Unmarshal(j.Metadata, &meta)
			if j.ID > lastJob && (j.FinalizedAt != nil || meta["snoozes"] != nil) {
				settled++
			}
		}
		return settled >= turns, fmt.Sprintf("%d of %d settled", settled, turns)
	})
	close(gate)
	e.waitFor("the retried turns done", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "")
		if err != nil {
			return false, err.Error()
		}
		return st.TurnsProcessed+st.TurnsFailed == int64(turns), fmt.Sprintf("%+v", st)
	})
	if failed, err := e.store.FailedTurns(e.ctx, "", 1000); err != nil || len(failed) != 0 {
		var why string
		if len(failed) > 0 {
			why = failed[0].LastError
		}
		t.Fatalf("%d of %d turns retried after the fix failed again (%v), the first: %s", len(failed), turns, err, why)
	}
}

// heldBack counts the extraction jobs whose requests were held back
// unsent: a hold in their metadata, or a turn failed with such an error.
func (e *env) heldBack() (int, string) {
	e.t.Helper()
	n := 0
	for _, j := range e.extractJobs() {
		var meta map[string]any
		_ = json.Unmarshal(j.Metadata, &meta)
		if meta["memoryd_unsent_holds"] != nil {
			n++
		}
	}
	failed, err := e.store.FailedTurns(e.ctx, "", 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range failed {
		if strings.Contains(f.LastError, "not sent") {
			n++
		}
	}
	return n, fmt.Sprintf("%d held back", n)
}

// lastExtractJob is the id of the last extraction job inserted so far.
func (e *env) lastExtractJob() int64 {
	e.t.Helper()
	var last int64
	for _, j := range e.extractJobs() {
		last = max(last, j.ID)
	}
	return last
}
