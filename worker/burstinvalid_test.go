package worker_test

import (
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestBurstRepeatingInvalidReplySendsItsTurnsOneARequest: a
// conversation's burst whose one request gets the same invalid replies at
// two attempts (a model that cannot follow the batch prompt, or one turn
// of it that derails the model) has its turns sent one a request, and
// only the turn whose own request gets the same invalid replies at two
// attempts fails for good: memoryd failed lists it alone, with that
// reason and its attempts. Before, the burst's second attempt failed
// every turn of it for good.
func TestBurstRepeatingInvalidReplySendsItsTurnsOneARequest(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var batchCalls, poisonCalls, otherCalls atomic.Int64
	const garbage = "I am sorry, I can only answer in prose."
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		text, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		switch {
		case !ok: // the burst's request
			batchCalls.Add(1)
			return extractortest.Content(garbage)
		case strings.Contains(text, "derail"):
			poisonCalls.Add(1)
			return extractortest.Content(garbage)
		}
		otherCalls.Add(1)
		return extractortest.Content(`{"facts":{"name":"Alice"}}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	// The first turn's job extracts the burst; the others' are due later.
	turns, ids := poisonTurns("derail", "b", 3, 1, "c1")
	insertBurst(t, e, turns, ids)
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 5 })
	st := e.waitDone(3)
	if st.TurnsProcessed != 2 || st.TurnsFailed != 1 {
		t.Errorf("stats %+v, want b0 and b2 processed, b1 failed", st)
	}
	// Two attempts of the burst (two calls each), then b1 at two
	// attempts of its own, b0 and b2 once.
	if b, p, o := batchCalls.Load(), poisonCalls.Load(), otherCalls.Load(); b != 4 || p != 4 || o != 2 {
		t.Errorf("calls: %d for the burst, %d for b1, %d for the others; want 4, 4, 2", b, p, o)
	}
	// What memoryd failed lists.
	failed, err := e.store.FailedTurns(e.ctx, "u", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].EventID != "b1" || failed[0].Attempts != 3 ||
		!strings.HasPrefix(failed[0].LastError, worker.RepeatedReplyReason) {
		for _, f := range failed {
			t.Errorf("failed: %s attempts=%d %q", f.EventID, f.Attempts, f.LastError)
		}
		t.Fatalf("%d failed turns, want b1 alone, at its 3rd attempt, for its repeated replies", len(failed))
	}
}
