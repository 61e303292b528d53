package worker_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestBurstTurnsSnoozedForA429WaitForTheirJobOrTheNextBurst: the turns of
// a burst whose request got a 429 with Retry-After 600 wait with its job,
// snoozed for the server's delay: the reconciler gives the turn it
// released no job of its own. A new turn of the conversation in a serve
// whose client is not paused (here a serve started after the first
// stopped) takes them at once: its burst claims them, and the snoozed job
// is still waiting when they are processed. What docs/operations.md says
// of a 429.
func TestBurstTurnsSnoozedForA429WaitForTheirJobOrTheNextBurst(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var batches atomic.Int64
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		if _, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content); ok {
			return extractortest.Content(`{"facts":{"name":"Alice"}}`)
		}
		if batches.Add(1) == 1 {
			return extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{"error":{"message":"slow down"}}`,
				Header: http.Header{"Retry-After": []string{"600"}}}
		}
		return extractortest.Content(`{"facts":[],"context":[]}`)
	})
	llm := func() *extractor.LLM {
		llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
		if err != nil {
			t.Fatal(err)
		}
		return llm
	}
	turns, ids := poisonTurns("", "b", 2, -1, "c1")
	for i := range turns {
		turns[i].UserID = "alice"
	}
	insertBurst(t, e, turns, ids)
	w, stop := e.startWorker(llm(), func(c *worker.Config) { c.ExtractDebounce = 50 * time.Millisecond })
	var snoozed int64
	e.waitFor("the burst's job snoozed for the 429", func() (bool, string) {
		err := e.store.Pool().QueryRow(e.ctx, `SELECT id FROM river_job WHERE kind = $1 AND args->'event_ids' ? 'b0'
			AND state = 'scheduled' AND scheduled_at > now() + interval '5 minutes'`, worker.ExtractJobKind).Scan(&snoozed)
		return err == nil, fmt.Sprint(err)
	})
	// b1's own job ended (as when it found b1 claimed): b1 is the snoozed
	// job's, released, and the reconciler leaves it to it.
	e.exec(`DELETE FROM river_job WHERE kind = $1 AND args->'event_ids' ? 'b1'`, worker.ExtractJobKind)
	if n, err := worker.Reconcile(e.ctx, w); err != nil || n != 0 {
		t.Fatalf("reconcile gave %d turns a job (%v); want b1 left to the snoozed job", n, err)
	}
	if b1 := e.turnStatus("b1"); b1.Status != "pending" {
		t.Fatalf("b1 = %+v, want pending", b1)
	}
	stop()
	e.start(llm(), func(c *worker.Config) { c.ExtractDebounce = 50 * time.Millisecond })
	e.publish(events.Turn{ID: "b2", UserID: "alice", ConversationID: "c1", UserMessage: "I have a dog.", AssistantResponse: "ok", Timestamp: time.Now()})
	st := e.waitDone(3)
	if st.TurnsProcessed != 3 {
		t.Fatalf("stats %+v, want b0, b1 and b2 processed", st)
	}
	if state := e.jobState(snoozed); state != "scheduled" {
		t.Fatalf("the snoozed job is %s; want it still waiting: the new turn's burst took its turns", state)
	}
}
