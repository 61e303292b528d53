package worker_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// A live turn that ingest records and extracts after a replay's reset,
// before the replay reads it, is not extracted a second time: its memory
// is already the rebuilt one. Found by a lifecycle walk (two serves, a
// model whose wording depends on the conversation's earlier turns, as a
// real model's does): `replay --reset --user mia` beside mia's live turns
// left 1 of 528 turns (12 of 528 beside a killed replay) with two
// context items, the same turn extracted twice, each time given other
// earlier turns.
func TestReplayResetLeavesALiveTurnExtractedSinceItOnce(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var calls atomic.Int64
	// Each request is worded otherwise, as a model given other earlier
	// turns may word the same turn.
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		n := calls.Add(1)
		return extractortest.Content(fmt.Sprintf(`{"context":[{"q":"What did the user say, take %d?","a":"Something, take %d."}]}`, n, n))
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	stop := e.start(llm, nil)
	e.publish(events.Turn{ID: "m1", UserID: "mia", ConversationID: "c", UserMessage: "I went hiking.", AssistantResponse: "Nice."})
	e.waitDone(1)
	stop()
	// Published while no worker reads: ingest records it after the reset.
	e.publish(events.Turn{ID: "m2", UserID: "mia", ConversationID: "c", UserMessage: "I bought boots.", AssistantResponse: "Good."})

	var once sync.Once
	p, err := worker.Replay(e.ctx, worker.ReplayConfig{
		JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream,
		Users: []string{"mia"}, Reset: true, BatchSize: 1,
		// After m1 is recorded and before m2 is: the serves ingest and
		// extract m2 meanwhile.
		Progress: func(worker.ReplayProgress) {
			once.Do(func() {
				e.start(llm, nil)
				e.waitFor("m2 extracted by the live worker", func() (bool, string) {
					st, err := e.store.Stats(e.ctx, "mia")
					return err == nil && st.TurnsProcessed == 2, fmt.Sprintf("%+v %v", st, err)
				})
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Read != 2 {
		t.Fatalf("replay read %d events, want 2: %+v", p.Read, p)
	}
	e.waitFor("replayed turns processed", func() (bool, string) {
		n, err := e.store.PendingTurns(e.ctx, nil)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	items, err := e.store.RecentContext(e.ctx, "mia", 100)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, it := range items {
		per[it.EventID] = append(per[it.EventID], it.Question)
	}
	for _, id := range []string{"m1", "m2"} {
		if len(per[id]) != 1 {
			t.Errorf("turn %s has %d context items after the reset replay, want 1: %q", id, len(per[id]), per[id])
		}
	}
}
