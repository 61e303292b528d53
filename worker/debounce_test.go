package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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

// burstReply is a batch extraction for a burst of three turns.
const burstReply = `{"facts":[{"turn":1,"key":"pet","value":"cat"},{"turn":3,"key":"pet_name","value":"Tom"}],"context":[{"turn":2,"q":"What do I feed my cat?","a":"Fish"}]}`

func (e *env) publishBurst(conv string) []string {
	e.t.Helper()
	var ids []string
	for i, msg := range []string{"I have a cat.", "What should I feed it?", "Its name is Tom."} {
		id := fmt.Sprintf("%s-%d", conv, i+1)
		e.publish(events.Turn{ID: id, UserID: "alice", ConversationID: conv, UserMessage: msg,
			AssistantResponse: "ok", Timestamp: t0.Add(time.Duration(i) * time.Second)})
		ids = append(ids, id)
	}
	return ids
}

// TestShutdownDuringABurstLeavesNoTurnPending: a worker is stopped (its
// grace period already over, as when SIGTERM's shutdown timeout runs out)
// while a debounced burst's model call runs. The job is handed back; after a
// restart the burst must be extracted, not left pending behind the claim of
// the job that was handed back.
func TestShutdownDuringABurstLeavesNoTurnPending(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var (
		blocking atomic.Bool
		arrived  = make(chan struct{}, 1)
		release  = make(chan struct{})
		once     sync.Once
	)
	unblock := func() { once.Do(func() { blocking.Store(false); close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for requests in flight
	blocking.Store(true)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		if blocking.Load() {
			select {
			case arrived <- struct{}{}:
			default:
			}
			<-release
		}
		return extractortest.Content(burstReply)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	ids := e.publishBurst("c1")

	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: llm, Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, JobRetryBase: 10 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond,
		RetryBackoff: 50 * time.Millisecond, ExtractDebounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the burst's model call did not start")
	}
	over, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Stop(over); err != nil {
		t.Fatal(err)
	}
	unblock()
	for _, id := range ids {
		if turn, err := e.store.GetTurn(e.ctx, id); err != nil || turn.Status != store.StatusPending {
			t.Fatalf("turn %s after the shutdown = %+v, %v; want it pending", id, turn, err)
		}
	}

	e.start(llm, func(c *worker.Config) { c.ExtractDebounce = 100 * time.Millisecond })
	e.waitFor("the burst processed after the restart", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsProcessed == 3, fmt.Sprintf("%+v %v", st, err)
	})
	if f, err := e.store.Fact(e.ctx, "alice", "pet_name"); err != nil || f.EventID != ids[2] {
		t.Fatalf("fact pet_name = %+v, %v; want it from %s", f, err, ids[2])
	}
}
