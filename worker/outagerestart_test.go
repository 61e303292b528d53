package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
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

// TestModelAnswering500sWaitsAcrossRestarts: an outage of 500s shorter
// than --llm-max-outage fails no turn even when the serve is restarted
// during it (an operator restarting memoryd while the model server is
// down, a rolling deploy). Found by a retries walk: the row of 500s that
// makes an outage is the process's own, in memory, so each new process
// spent attempts on its first requests until it had seen three different
// ones fail; the job whose attempt was spent is retried first (River's
// backoff is shorter than the outage snoozes), so the same turn lost an
// attempt at every restart: with --max-attempts 3 and 4 restarts in a
// 43-second outage, 2 of 10 turns failed.
func TestModelAnswering500sWaitsAcrossRestarts(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var down atomic.Bool
	var served atomic.Int64
	down.Store(true)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		served.Add(1)
		if down.Load() {
			return extractortest.Error(http.StatusInternalServerError, "model runner restarting")
		}
		return extractortest.Content(`{"facts":[{"op":"set","key":"name","value":"Alice"}],"context":[]}`)
	})
	newLLM := func() *extractor.LLM {
		// Every request sent (no probing): each process below is
		// counted by the requests it makes.
		llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", MaxProbeGap: -1})
		if err != nil {
			t.Fatal(err)
		}
		return llm
	}
	const turns, maxAttempts, restarts = 6, 3, 4
	// Snoozes and retries at serve's proportions (2 s doubling), scaled
	// down: an attempt's retry comes before the outage snoozes grown meanwhile.
	cfg := func(c *worker.Config) { c.MaxAttempts, c.JobRetryBase = maxAttempts, 25*time.Millisecond }
	for i := range turns {
		e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: fmt.Sprintf("user%d", i), UserMessage: fmt.Sprintf("My name is Alice and I have %d cats.", i)})
	}
	for range restarts {
		// A new process (a fresh extractor, as serve builds one) that
		// makes a few requests to the server that is still down.
		from := served.Load()
		stop := e.start(newLLM(), cfg)
		deadline := time.Now().Add(30 * time.Second)
		for served.Load() < from+12 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		stop()
	}
	down.Store(false)
	e.start(newLLM(), cfg)
	if st := e.waitDone(turns); st.TurnsProcessed != turns {
		t.Fatalf("stats %+v after a model outage of 500s across %d restarts, want %d turns processed and none failed", st, restarts, turns)
	}
}

// TestRateLimitLogsOnceAJob: a job snoozed again and again by 429s logs
// its first snooze at info and the later ones at debug, as the waits for
// a server that is down do (TestModelOutageLogsOnceAJob). Before, every
// snooze was an info line (a retries walk: 291 lines for 66 jobs in 54 s
// of 429s with Retry-After: 5).
func TestRateLimitLogsOnceAJob(t *testing.T) {
	e := setup(t)
	const turns, limited = 3, 9 // more 429s than jobs: some job waits twice
	llm := modelDownFor(t, limited, extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{"error":"slow down"}`,
		Header: http.Header{"Retry-After": {"0"}}})
	var logs lockedBuffer
	e.start(llm, func(c *worker.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	for i := range turns {
		e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: fmt.Sprintf("user%d", i), UserMessage: "My name is Alice."})
	}
	if st := e.waitDone(turns); st.TurnsProcessed != turns {
		t.Fatalf("stats %+v, want %d turns processed once the server stops limiting", st, turns)
	}
	levels := map[string]int{}
	for l := range strings.Lines(logs.String()) {
		var line struct{ Level, Msg string }
		if json.Unmarshal([]byte(l), &line) == nil && strings.HasPrefix(line.Msg, "model server rate limited extraction") {
			levels[line.Level]++
		}
	}
	if levels["INFO"] > turns || levels["DEBUG"] == 0 {
		t.Fatalf("429 snoozes logged at %v, want at most one info line a job (%d) and the later waits at debug", levels, turns)
	}
}
