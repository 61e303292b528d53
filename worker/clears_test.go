package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// gatedExtractor holds each extraction, once hold is called, until the
// returned release is called, telling entered which turn it holds.
type gatedExtractor struct {
	worker.Extractor
	entered chan string
	mu      sync.Mutex
	gate    chan struct{}
}

func (g *gatedExtractor) hold() (release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gate := make(chan struct{})
	g.gate = gate
	return func() {
		g.mu.Lock()
		g.gate = nil
		g.mu.Unlock()
		close(gate)
	}
}

func (g *gatedExtractor) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.entered <- in.Turn.EventID
		select {
		case <-gate:
		case <-ctx.Done():
			return extractor.Result{}, ctx.Err()
		}
	}
	return g.Extractor.Extract(ctx, in)
}

// TestClearsHoldDuringExtractionAndReplay: facts.clear and clear all while
// an earlier turn is being extracted stay cleared when that extraction ends,
// and after replays of the user (with and without reset); a turn stamped
// after the clear sets the fact again and survives the replays.
func TestClearsHoldDuringExtractionAndReplay(t *testing.T) {
	e := setup(t)
	g := &gatedExtractor{Extractor: extractor.NewRules(), entered: make(chan string, 100)}
	e.start(g, nil)
	location := func() string {
		t.Helper()
		f, err := e.store.Fact(e.ctx, "alice", "location")
		if errors.Is(err, store.ErrNotFound) {
			return "<none>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return f.Value
	}
	contextItems := func() int64 {
		t.Helper()
		n, err := e.store.CountContext(e.ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Noted.", Timestamp: t0})
	e.waitDone(1)
	if location() != "Paris" || contextItems() != 1 {
		t.Fatalf("after the first turn: location %s, %d context items; want Paris and 1", location(), contextItems())
	}

	// An earlier-stamped turn is being extracted while the user clears.
	release := g.hold()
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Rome.", AssistantResponse: "Ok.", Timestamp: t0.Add(time.Minute)})
	if id := <-g.entered; id != "a2" {
		t.Fatalf("extracting %s, want a2", id)
	}
	if n, err := e.store.DeleteFact(e.ctx, "alice", "location"); err != nil || n != 1 {
		t.Fatalf("facts.clear = %d, %v", n, err)
	}
	if n, err := e.store.DeleteContext(e.ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 1 {
		t.Fatalf("clear all = %d, %v", n, err)
	}
	release()
	e.waitDone(2)
	if location() != "<none>" || contextItems() != 0 {
		t.Fatalf("after the extraction in flight ended: location %s, %d context items; want both cleared", location(), contextItems())
	}

	for _, reset := range []bool{true, false} {
		e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: reset})
		if location() != "<none>" || contextItems() != 0 {
			t.Fatalf("after replay --user alice (reset %v): location %s, %d context items; want both cleared", reset, location(), contextItems())
		}
	}

	// A turn after the clear sets the fact again, and a replay keeps it.
	e.publish(events.Turn{ID: "a3", UserID: "alice", UserMessage: "I live in Oslo.", AssistantResponse: "Nice.", Timestamp: time.Now().UTC()})
	e.waitDone(3)
	if location() != "Oslo" || contextItems() != 1 {
		t.Fatalf("after a later turn: location %s, %d context items; want Oslo and 1", location(), contextItems())
	}
	for _, reset := range []bool{false, true} {
		e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: reset})
		if location() != "Oslo" || contextItems() != 1 {
			t.Fatalf("after replay --user alice (reset %v): location %s, %d context items; want Oslo and 1", reset, location(), contextItems())
		}
	}
}

// TestClearThenReplayStaysCleared: facts.clear and clear all, then replays
// of the user (with and without reset): nothing comes back, and bob's memory
// is untouched.
func TestClearThenReplayStaysCleared(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedConversation()
	bob := e.snapshot("bob")
	if n, err := e.store.DeleteFact(e.ctx, "alice", "location"); err != nil || n != 1 {
		t.Fatalf("facts.clear = %d, %v", n, err)
	}
	if n, err := e.store.DeleteContext(e.ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 10 {
		t.Fatalf("clear all = %d, %v", n, err)
	}
	cleared := e.snapshot("alice")
	for _, reset := range []bool{true, false} {
		e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: reset})
		if got := e.snapshot("alice"); got != cleared {
			t.Fatalf("after replay --user alice (reset %v):\n got  %s\n want %s", reset, got, cleared)
		}
	}
	if e.snapshot("bob") != bob {
		t.Fatal("bob's memory changed")
	}
}

// TestClearCoversTurnsPublishedBeforeItWhateverTheirTime: a frontend whose
// clock runs 3 minutes ahead (within the allowed skew, so the timestamp is
// kept) publishes a turn, which is acknowledged, then the user clears the
// fact and every context item before the turn is extracted. The turn's
// timestamp is later than the clears, but the turn stream held it when they
// were made: nothing of it is stored, neither when its extraction ends nor
// after replays (with and without reset). A turn published after the
// clears is kept.
func TestClearCoversTurnsPublishedBeforeItWhateverTheirTime(t *testing.T) {
	e := setup(t)
	// What serve sets for the memory tools' clears.
	e.store.SetTurnStream(worker.TurnStreamPosition(e.js, e.stream))
	g := &gatedExtractor{Extractor: extractor.NewRules(), entered: make(chan string, 100)}
	e.start(g, nil)
	snapshot := func() (string, int64) {
		t.Helper()
		f, err := e.store.Fact(e.ctx, "alice", "location")
		value := f.Value
		if errors.Is(err, store.ErrNotFound) {
			value = "<none>"
		} else if err != nil {
			t.Fatal(err)
		}
		n, err := e.store.CountContext(e.ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		return value, n
	}

	release := g.hold()
	ahead := time.Now().UTC().Add(3 * time.Minute)
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Rome. My secret hobby is falconry.", AssistantResponse: "Noted.", Timestamp: ahead})
	if id := <-g.entered; id != "a1" {
		t.Fatalf("extracting %s, want a1", id)
	}
	// Nothing stored yet: both clears delete nothing, and still count.
	if n, err := e.store.DeleteFact(e.ctx, "alice", "location"); err != nil || n != 0 {
		t.Fatalf("facts.clear = %d, %v; want 0", n, err)
	}
	if n, err := e.store.DeleteContext(e.ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 0 {
		t.Fatalf("clear all = %d, %v; want 0", n, err)
	}
	release()
	e.waitDone(1)
	if v, n := snapshot(); v != "<none>" || n != 0 {
		t.Fatalf("after the turn stamped ahead was extracted: location %s, %d context items; want both cleared", v, n)
	}
	for _, reset := range []bool{false, true} {
		e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: reset})
		if v, n := snapshot(); v != "<none>" || n != 0 {
			t.Fatalf("after replay --user alice (reset %v): location %s, %d context items; want both cleared", reset, v, n)
		}
	}

	// Published after the clears, stamped before the first turn: its
	// timestamp is later than the clears, and the stream did not hold it.
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Oslo.", AssistantResponse: "Nice.", Timestamp: ahead.Add(-time.Minute)})
	e.waitDone(2)
	if v, n := snapshot(); v != "Oslo" || n != 1 {
		t.Fatalf("after a turn published after the clears: location %s, %d context items; want Oslo and 1", v, n)
	}
	for _, reset := range []bool{false, true} {
		e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: reset})
		if v, n := snapshot(); v != "Oslo" || n != 1 {
			t.Fatalf("after replay --user alice (reset %v): location %s, %d context items; want Oslo and 1", reset, v, n)
		}
	}
}
