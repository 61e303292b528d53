package store_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestResetKeepsWhatAReplayCannotRebuild: a reset (before replay --reset)
// deletes the memory extracted from turns memoryd recorded, which the
// replay extracts again, and keeps memory whose source turn it never
// recorded: an import of another user's export (a move from another
// memoryd, or this one's own export brought back after a forget) has no
// turns here, so deleting it would lose it for good.
//
// Event ids are unique per user only: dave's own turn "e1", at the same
// time (two frontends counting 1, 2, ... from the same start), does not
// make bob's imported "e1" memory rebuildable: what an import brought is
// kept, what dave's own e1 gave is reset.
func TestResetKeepsWhatAReplayCannotRebuild(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "bob", UserMessage: "I live in Paris", TurnAt: t0},
		{EventID: "e1", UserID: "dave", UserMessage: "What time is it?", TurnAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	rules := store.Provenance{Extractor: "rules"}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "bob", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1", Provenance: rules},
		{UserID: "bob", Key: "likes", Value: "jazz", SourceAt: t0, EventID: "e1", Op: store.FactAdd, List: true, Provenance: rules}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "bob", Question: "I live in Paris", Answer: "ok", EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"carol", "dave"} {
		if _, err := s.Import(ctx, to, to, bytes.NewReader(exp.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
	// What dave's own e1 stated is extracted under the same event id: the
	// reset deletes it (a replay extracts it again), and keeps what the
	// import brought.
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "dave", Question: "What time is it?", Answer: "noon", EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "dave", Key: "likes", Value: "noon walks", SourceAt: t0, EventID: "e1", Op: store.FactAdd, List: true, Provenance: rules}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"bob", "carol", "dave"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user         string
		facts, items int64
	}{{"bob", 0, 0}, {"carol", 2, 1}, {"dave", 2, 1}} {
		st, err := s.Stats(ctx, c.user)
		if err != nil {
			t.Fatal(err)
		}
		if st.Facts != c.facts || st.ContextItems != c.items {
			t.Errorf("%s after a reset: %d facts, %d context items; want %d and %d", c.user, st.Facts, st.ContextItems, c.facts, c.items)
		}
	}
	// dave's list keeps the imported item, not his own e1's.
	if f, err := s.Fact(ctx, "dave", "likes"); err != nil || f.Value != "jazz" {
		t.Errorf("dave's likes after a reset: %+v, %v; want the imported jazz only", f, err)
	}
}

// A list key whose items a reset keeps all (one direct, one imported under
// an event id of the user's own turn) keeps its facts row: it is the items'
// union, which matches no imported line's value.
func TestResetKeepsAListWhoseItemsItKeeps(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "bob", UserMessage: "I like jazz", TurnAt: t0},
		{EventID: "e1", UserID: "dave", UserMessage: "Hi", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "bob", Key: "likes", Value: "jazz", SourceAt: t0.Add(time.Hour), EventID: "e1", Op: store.FactAdd, List: true, Provenance: store.Provenance{Extractor: "rules"}},
		{UserID: "dave", Key: "likes", Value: "chess", SourceAt: t0, Op: store.FactAdd, List: true, Provenance: store.Provenance{Extractor: "direct"}},
	}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "dave", "dave", &exp); err != nil {
		t.Fatal(err)
	}
	before, err := s.Fact(ctx, "dave", "likes")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"dave"}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "dave", "likes"); err != nil || f.Value != before.Value {
		t.Errorf("dave's likes after a reset: %+v, %v; want %q", f, err, before.Value)
	}
}

// A context item corrected by context.update is the user's own write: a
// reset keeps it. It had kept its extractor and event, so the reset
// deleted it as rebuildable, and the replay could not bring it back: the
// update had cleared the old pair, which is all the turn says (a race
// hunt: after replay --reset the user had neither text). A rewrite of
// case or spacing only is no correction and changes nothing of its source.
func TestResetKeepsACorrectedItem(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "My violin teacher is Anna", TurnAt: t0},
		{EventID: "e2", UserID: "alice", UserMessage: "I play on Tuesdays", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	rules := store.Provenance{Extractor: "rules"}
	ids := make([]int64, 2)
	for i, w := range []store.ContextWrite{
		{UserID: "alice", Question: "My violin teacher is Anna", Answer: "Noted", EventID: "e1", CreatedAt: t0, Provenance: rules},
		{UserID: "alice", Question: "I play on Tuesdays", Answer: "Noted", EventID: "e2", CreatedAt: t0, Provenance: rules},
	} {
		id, _, err := s.StoreContext(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	maria, tuesdays := "My violin teacher is Maria", "i PLAY on   tuesdays"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[0], Question: &maria}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[1], Question: &tuesdays}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if it, err := s.ContextByID(ctx, "alice", ids[0]); err != nil || it.Question != maria || it.EventID != "e1" {
		t.Fatalf("the corrected item after a reset: %+v, %v; want it kept, with its source", it, err)
	}
	if _, err := s.ContextByID(ctx, "alice", ids[1]); err == nil {
		t.Fatal("the item rewritten in case and spacing only survived the reset; want it rebuilt by the replay like any extracted item")
	}
}
