package worker_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// wordingExtractor stores every turn as one pair, worded by its model.
type wordingExtractor struct {
	model string
	qa    extractor.QA
}

func (w wordingExtractor) Extract(context.Context, extractor.Input) (extractor.Result, error) {
	return extractor.Result{Context: []extractor.QA{w.qa}}, nil
}

func (w wordingExtractor) Info() extractor.Info {
	return extractor.Info{Name: "llm", Model: w.model, PromptVersion: "v1"}
}

// TestReplayResetByAnotherModelKeepsAPairTheUserStored: a user's store of
// the pair a turn's extraction had stored answered stored false with that
// item's id; a replay --reset by another model, which words the turn
// otherwise, then lost it: the reset deleted the extracted item, and
// nothing brought the user's pair back.
func TestReplayResetByAnotherModelKeepsAPairTheUserStored(t *testing.T) {
	e := setup(t)
	pair := extractor.QA{Q: "What is my dog called?", A: "Rex"}
	stop := e.start(wordingExtractor{model: "m1", qa: pair}, nil)
	e.publish(events.Turn{ID: "e1", UserID: "alice", UserMessage: "My dog is called Rex.", AssistantResponse: "Nice!"})
	e.waitDone(1)
	// What the store endpoint writes (enricher's storeContext).
	id, stored, err := e.store.StoreContext(e.ctx, store.ContextWrite{UserID: "alice", Question: pair.Q, Answer: pair.A,
		Provenance: store.Provenance{Extractor: "direct"}})
	if err != nil || stored {
		t.Fatalf("store of the extracted pair: stored %v, %v; want the item held", stored, err)
	}
	stop()
	e.start(wordingExtractor{model: "m2", qa: extractor.QA{Q: "Name of my dog?", A: "Rex"}}, nil)
	e.replay(worker.ReplayConfig{Reset: true})
	if _, err := e.store.ContextByID(e.ctx, "alice", id); err != nil {
		t.Errorf("the pair alice stored, after a replay --reset by another model: %v; want it kept", err)
	}
	// The replay did extract the turn again, in m2's words.
	items, err := e.store.RecentContext(e.ctx, "alice", 10)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range items {
		found = found || it.Question == "Name of my dog?"
	}
	if !found {
		t.Errorf("after the replay: %+v; want m2's pair among them", items)
	}
}
