package worker_test

import (
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// TestTurnScopeReachesContextItems: a turn's scope is recorded with it and
// carried by the context items extracted from it; a turn without one gives
// items without one.
func TestTurnScopeReachesContextItems(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "a1", UserID: "alice", Scope: "app-a", UserMessage: "How do I boil an egg?", AssistantResponse: "Boil it for 8 minutes."})
	e.publish(events.Turn{ID: "b1", UserID: "alice", Scope: "app-b", UserMessage: "What's 2+2?", AssistantResponse: "4"})
	e.publish(events.Turn{ID: "n1", UserID: "alice", UserMessage: "Which tea is best?", AssistantResponse: "Green."})
	if st := e.waitDone(3); st.ContextItems != 3 {
		t.Fatalf("stats = %+v, want 3 context items", st)
	}
	for _, c := range []struct{ scope, event string }{{"app-a", "a1"}, {"app-b", "b1"}} {
		turn, err := e.store.GetTurn(e.ctx, "alice", c.event)
		if err != nil || turn.Scope != c.scope {
			t.Errorf("turn %s: scope %q, %v; want %q", c.event, turn.Scope, err, c.scope)
		}
		items, err := e.store.ListScopedContext(e.ctx, "alice", c.scope, store.ContextCursor{}, 10)
		if err != nil || len(items) != 1 || items[0].EventID != c.event {
			t.Errorf("scope %s: items %+v, %v; want the item of turn %s alone", c.scope, items, err, c.event)
		}
	}
	if all, err := e.store.ListScopedContext(e.ctx, "alice", "", store.ContextCursor{}, 10); err != nil || len(all) != 3 {
		t.Errorf("no scope: %d items, %v; want all 3", len(all), err)
	}
}
