package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestStopDuringModelCallHandsTheJobBack: a worker stopped (serve's
// SIGTERM) while its job waits on a slow model server cuts the call at
// its stop's deadline and hands the job back without spending an attempt
// or recording a failure; the next worker (another serve, or this one
// restarted) extracts the turn. Nothing is lost. So for a conversation's
// burst, whose claim on its turns is released.
func TestStopDuringModelCallHandsTheJobBack(t *testing.T) {
	t.Run("turn", func(t *testing.T) { stopDuringModelCall(t, false) })
	t.Run("burst", func(t *testing.T) { stopDuringModelCall(t, true) })
}

func stopDuringModelCall(t *testing.T, burst bool) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	inFlight, release := make(chan struct{}), make(chan struct{})
	var slow atomic.Bool
	slow.Store(true)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		if slow.Load() {
			close(inFlight) // one slow call: a second would panic
			<-release
		}
		return extractortest.Content(`{"facts":{"name":"Alice"}}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	w, _ := e.startWorker(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	ids, user := []string{"t1"}, "alice"
	if burst {
		var turns []store.Turn
		turns, ids = poisonTurns("", "b", 3, -1, "c1")
		user = "u"
		insertBurst(t, e, turns, ids)
	} else {
		e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	}
	<-inFlight
	slow.Store(false)
	// A short grace: River waits for the job that long, then cancels it.
	ctx, cancel := context.WithTimeout(e.ctx, time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, id := range ids {
		turn, err := e.store.GetTurn(e.ctx, user, id)
		if err != nil {
			t.Fatal(err)
		}
		if turn.Status != store.StatusPending || turn.Attempts != 0 || turn.LastError != "" {
			t.Fatalf("%s after the stop: %s, %d attempts, %q; want pending, no failure recorded", id, turn.Status, turn.Attempts, turn.LastError)
		}
	}
	var state string
	var claimed int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT state FROM river_job WHERE kind = $1 ORDER BY id LIMIT 1`, worker.ExtractJobKind).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE claimed_until > now()`).Scan(&claimed); err != nil {
		t.Fatal(err)
	}
	if claimed != 0 {
		t.Errorf("%d turns still claimed after the stop, want the claim released", claimed)
	}
	if state != "scheduled" && state != "available" {
		t.Fatalf("job %s after the stop, want it handed back (scheduled or available)", state)
	}
	// MaxAttempts 1: an attempt spent by the cut call would fail the turn.
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	e.waitFor("every turn processed", func() (bool, string) {
		for _, id := range ids {
			turn, err := e.store.GetTurn(e.ctx, user, id)
			if err != nil || turn.Status != store.StatusProcessed {
				return false, fmt.Sprintf("%s: %s %q %v", id, turn.Status, turn.LastError, err)
			}
		}
		return true, ""
	})
	if got := srv.Requests(); got != 2 {
		t.Errorf("model calls = %d, want 2 (the cut one, then the answered one: a burst in one request)", got)
	}
}
