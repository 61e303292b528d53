package worker_test

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// rewordingModel is a fake model that words the turn's pair otherwise at
// every call, and states the same fact each time.
func rewordingModel(t *testing.T) worker.Extractor {
	t.Helper()
	srv := extractortest.NewServer(t)
	var calls atomic.Int64
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		n := calls.Add(1)
		return extractortest.Content(fmt.Sprintf(`{"facts":{"location":"Lisbon"},"context":[{"q":"What is my dog called (take %d)?","a":"Rex"}]}`, n))
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return llm
}

// dogItems are the user's items of eventID that the model worded.
func dogItems(e *env, user, eventID string) []store.ContextItem {
	e.t.Helper()
	items, err := e.store.RecentContext(e.ctx, user, 50)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []store.ContextItem
	for _, it := range items {
		if it.EventID == eventID && strings.HasPrefix(it.Question, "What is my dog called") {
			out = append(out, it)
		}
	}
	return out
}

// TestReplayReplacesATurnsEarlierExtraction: a replay without --reset
// extracted a processed turn again, and a model wording it otherwise left
// the user two items for the one turn. The fact it states again, unchanged,
// gets no second history entry.
func TestReplayReplacesATurnsEarlierExtraction(t *testing.T) {
	e := setup(t)
	e.start(rewordingModel(t), nil)
	e.publish(events.Turn{ID: "e1", UserID: "alice", UserMessage: "My dog is called Rex. I live in Lisbon.", AssistantResponse: "Nice!"})
	e.waitDone(1)
	if got := dogItems(e, "alice", "e1"); len(got) != 1 {
		t.Fatalf("e1's items after its extraction: %+v; want 1", got)
	}
	e.replay(worker.ReplayConfig{})
	got := dogItems(e, "alice", "e1")
	if len(got) != 1 || got[0].Question != "What is my dog called (take 2)?" {
		t.Errorf("e1's items after a replay: %+v; want 1, the replay's", got)
	}
	hist, err := e.store.FactHistory(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 {
		t.Errorf("alice's fact history after the replay: %+v; want the one set of Lisbon", hist)
	}
}

// TestReplayKeepsDirectWritesAndImportsUnderATurnsEventID: the user's own
// store of a pair and an import's pair, both under the replayed turn's
// event id, stay.
func TestReplayKeepsDirectWritesAndImportsUnderATurnsEventID(t *testing.T) {
	e := setup(t)
	// bob's memory, whose turn shares alice's turn's event id.
	if _, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "bob", Question: "What is my cat called?", Answer: "Tom",
		EventID: "e1", CreatedAt: t0, Provenance: store.Provenance{Extractor: "llm", Model: "fake"}}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := e.store.Export(e.ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	e.start(rewordingModel(t), nil)
	e.publish(events.Turn{ID: "e1", UserID: "alice", UserMessage: "My dog is called Rex.", AssistantResponse: "Nice!"})
	e.waitDone(1)
	direct, _, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: "Where is my dog's vet?", Answer: "Porto",
		EventID: "e1", CreatedAt: t0, Provenance: store.Provenance{Extractor: "direct"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Import(e.ctx, "alice", "alice", bytes.NewReader(exp.Bytes())); err != nil {
		t.Fatal(err)
	}
	items, err := e.store.RecentContext(e.ctx, "alice", 50)
	if err != nil {
		t.Fatal(err)
	}
	var imported int64
	for _, it := range items {
		if it.Question == "What is my cat called?" {
			imported = it.ID
		}
	}
	if imported == 0 {
		t.Fatalf("alice's items after the import: %+v; want bob's pair", items)
	}
	e.replay(worker.ReplayConfig{})
	for _, id := range []int64{direct, imported} {
		if _, err := e.store.ContextByID(e.ctx, "alice", id); err != nil {
			t.Errorf("item %d after a replay: %v; want it kept", id, err)
		}
	}
	if got := dogItems(e, "alice", "e1"); len(got) != 1 {
		t.Errorf("e1's model items after a replay: %+v; want the replay's alone", got)
	}
}
