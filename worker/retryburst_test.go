package worker_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestRetriedTurnIsNotTakenByANewBurst: a turn of a conversation that
// retry-failed (it failed) or the reconciler (it had no job) gives a job,
// which names no conversation, is extracted once though a new turn of the
// conversation comes while that job's request is with the model: the new
// turn's burst leaves it to the job. Before, the burst claimed it too (it
// was pending and unclaimed) and the model was asked for it twice.
func TestRetriedTurnIsNotTakenByANewBurst(t *testing.T) {
	t.Run("retry-failed", func(t *testing.T) { turnOfAJobBesideABurst(t, true) })
	t.Run("reconcile", func(t *testing.T) { turnOfAJobBesideABurst(t, false) })
}

// turnOfAJobBesideABurst is TestRetriedTurnIsNotTakenByANewBurst, the turn
// failed and retried, or left with no job and reconciled.
func turnOfAJobBesideABurst(t *testing.T, retry bool) {
	e := setup(t)
	const retried, later = "I live in Reykjavik.", "I have a dog."
	srv := extractortest.NewServer(t)
	sent, release := make(chan struct{}), make(chan struct{})
	var (
		mu    sync.Mutex
		asked int // requests that held the retried turn
	)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	burst := make(chan bool, 1) // whether the new turn's request held the retried turn
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		prompt := req.Messages[len(req.Messages)-1].Content
		holds := strings.Contains(prompt, retried)
		if holds {
			mu.Lock()
			asked++
			mu.Unlock()
		}
		msg, _, alone := extractor.PromptTurn(prompt)
		if alone && msg == retried {
			close(sent)
			<-release // until the burst has been sent
			return extractortest.Content(`{"facts":{"name":"Alice"}}`)
		}
		// The new turn's burst: of one turn, sent as one.
		select {
		case burst <- holds:
		default:
		}
		if alone {
			return extractortest.Content(`{"facts":{"pet":"dog"}}`)
		}
		return extractortest.Content(`{"facts":[],"context":[]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	x := store.Turn{UserID: "alice", EventID: "x", ConversationID: "c1", UserMessage: retried, AssistantResponse: "ok", TurnAt: t0}
	if _, err := e.store.InsertTurns(e.ctx, []store.Turn{x}); err != nil {
		t.Fatal(err)
	}
	if retry {
		if err := e.store.MarkFailed(e.ctx, "alice", []string{"x"}, "the model was down", true); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := e.startWorker(llm, func(c *worker.Config) { c.ExtractDebounce = 50 * time.Millisecond })
	if retry {
		if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, false); err != nil || n != 1 {
			t.Fatalf("retry failed: %d, %v; want x retried", n, err)
		}
	} else if _, err := worker.Reconcile(e.ctx, w); err != nil { // or the one run at the start did
		t.Fatal(err)
	}
	waitClosed(t, sent, "the retried turn's request")
	e.publish(events.Turn{ID: "y", UserID: "alice", ConversationID: "c1", UserMessage: later, AssistantResponse: "ok", Timestamp: t0.Add(time.Minute)})
	var held bool
	select {
	case held = <-burst:
	case <-time.After(time.Minute):
		t.Fatal("the new turn's burst sent no request within a minute")
	}
	once.Do(func() { close(release) })
	st := e.waitDone(2)
	if st.TurnsProcessed != 2 {
		t.Fatalf("stats %+v, want x and y processed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if held || asked != 1 {
		t.Fatalf("the model was asked for the retried turn %d times (in the new turn's burst: %v); want once, by its own job", asked, held)
	}
}
