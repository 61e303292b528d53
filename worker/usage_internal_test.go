package worker

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
)

// TestUsageBacklogBound: the backlog gives back its oldest calls once, as
// many as asked, and drops the oldest calls past maxUsageBacklog, saying
// how many.
func TestUsageBacklogBound(t *testing.T) {
	var b usageBacklog
	call := func(i int) usageCall { return usageCall{used: store.TokenUsage{PromptTokens: int64(i)}} }
	var calls []usageCall
	for i := range maxUsageBacklog - 1 {
		calls = append(calls, call(i))
	}
	if dropped := b.put(calls); dropped != 0 {
		t.Fatalf("dropped %d under the bound", dropped)
	}
	if dropped := b.put([]usageCall{call(maxUsageBacklog - 1), call(maxUsageBacklog), call(maxUsageBacklog + 1)}); dropped != 2 {
		t.Fatalf("dropped %d, want the 2 oldest", dropped)
	}
	if first, _ := b.take(3, time.Time{}); len(first) != 3 || first[0].used.PromptTokens != 2 || first[2].used.PromptTokens != 4 {
		t.Fatalf("took %v, want the 3 oldest, 2 to 4", first)
	}
	held, _ := b.take(maxUsageBacklog, time.Time{})
	if len(held) != maxUsageBacklog-3 || held[0].used.PromptTokens != 5 || held[len(held)-1].used.PromptTokens != maxUsageBacklog+1 {
		t.Fatalf("held %d calls, %d to %d; want %d, 5 to %d", len(held), held[0].used.PromptTokens, held[len(held)-1].used.PromptTokens, maxUsageBacklog-3, maxUsageBacklog+1)
	}
	if again, _ := b.take(maxUsageBacklog, time.Time{}); len(again) != 0 || b.len() != 0 {
		t.Fatalf("taken again: %d calls, %d held; want none", len(again), b.len())
	}
}

// TestUsageBacklogDrainsAFlushAtATime: a flush stores at most
// maxUsageDrain of the backlog's calls beside its own (a job meeting the
// database back after a long outage is not held for minutes by other
// jobs' calls, each its own transaction), and Stop stores the rest.
func TestUsageBacklogDrainsAFlushAtATime(t *testing.T) {
	_, w := haltSetup(t)
	ctx := context.Background()
	day := time.Now().UTC()
	backlog := maxUsageDrain + 7
	calls := make([]usageCall, backlog)
	for i := range calls {
		calls[i] = usageCall{turn: store.TurnKey{UserID: "alice", EventID: "e"}, model: "m", day: day, used: store.TokenUsage{PromptTokens: 1}}
	}
	w.usageBacklog.put(calls)
	own := usageCall{turn: store.TurnKey{UserID: "bob", EventID: "b"}, model: "m", day: day, used: store.TokenUsage{PromptTokens: 1}}
	if unstored := w.addCalls(ctx, []usageCall{own}, false); len(unstored) != 0 {
		t.Fatalf("the flush's own call unstored: %v", unstored)
	}
	spent := func(user string) int64 {
		t.Helper()
		sp, err := w.cfg.Store.SpendOn(ctx, day, user)
		if err != nil {
			t.Fatal(err)
		}
		return sp.User
	}
	if a, b, left := spent("alice"), spent("bob"), w.usageBacklog.len(); a != maxUsageDrain || b != 1 || left != backlog-maxUsageDrain {
		t.Fatalf("after one flush: alice %d tokens, bob %d, %d calls left; want %d, 1, %d", a, b, left, maxUsageDrain, backlog-maxUsageDrain)
	}
	w.usageBacklog.put(calls)
	if left := w.drainUsage(ctx); left != 0 {
		t.Fatalf("drain left %d calls, want none", left)
	}
	if a := spent("alice"); a != 2*int64(backlog) {
		t.Fatalf("after the drain: alice %d tokens, want %d", a, 2*backlog)
	}
}

// TestUsageBacklogDropsCallsPastTheirIdsAge: a call the backlog held past
// maxUsageAge (its id may be deleted by then, store.UsageCallsKept, and
// a call stored before would count again) is dropped unrecorded; a
// younger one is stored.
func TestUsageBacklogDropsCallsPastTheirIdsAge(t *testing.T) {
	_, w := haltSetup(t)
	ctx := context.Background()
	now := w.cfg.Store.Clock().Now()
	day := now.UTC()
	call := func(user string, made time.Time) usageCall {
		return usageCall{turn: store.TurnKey{UserID: user, EventID: "e"}, model: "m", day: day,
			used: store.TokenUsage{PromptTokens: 1}, id: store.NewCallID(made)}
	}
	w.usageBacklog.put([]usageCall{call("alice", now.Add(-maxUsageAge-time.Minute)), call("bob", now.Add(-maxUsageAge+time.Minute))})
	if left := w.drainUsage(ctx); left != 0 {
		t.Fatalf("drain left %d calls, want none", left)
	}
	for user, want := range map[string]int64{"alice": 0, "bob": 1} {
		sp, err := w.cfg.Store.SpendOn(ctx, day, user)
		if err != nil {
			t.Fatal(err)
		}
		if sp.User != want {
			t.Errorf("%s: %d tokens stored, want %d", user, sp.User, want)
		}
	}
}

// TestUsageCallIDs: each model call counted gets an id of its own, also a
// second call for the same turn (a run after a failed one asks the model
// again, and its tokens count again); a kept result's call keeps the id
// it was counted under, so that recording it again adds nothing.
func TestUsageCallIDs(t *testing.T) {
	u := &jobUsage{model: "m", clock: &store.Clock{}}
	turn := store.Turn{UserID: "alice", EventID: "e1"}
	used := extractor.Usage{PromptTokens: 10, CompletionTokens: 5}
	kept := store.NewCallID(time.Now())
	u.add(turn, used)
	u.add(turn, used)
	u.addCall(turn, used, kept)
	u.add(turn, extractor.Usage{}) // no tokens: nothing counted
	if len(u.ids) != 3 {
		t.Fatalf("%d calls counted, want 3", len(u.ids))
	}
	if u.ids[0].IsZero() || u.ids[1].IsZero() || u.ids[0] == u.ids[1] {
		t.Errorf("two calls for one turn have ids %x and %x; want two ids, not zero", u.ids[0], u.ids[1])
	}
	if u.ids[2] != kept {
		t.Errorf("a kept result's call counted under %x, want its own id %x", u.ids[2], kept)
	}
}

// TestReconcileDropsOldCallIDs: the leader's periodic cleanup
// (dropOldSpend) deletes the ids of calls made store.UsageCallsKept ago,
// and keeps the younger: recorded again, the old call counts again, the
// younger does not.
func TestReconcileDropsOldCallIDs(t *testing.T) {
	_, w := haltSetup(t)
	ctx := context.Background()
	now := w.cfg.Store.Clock().Now()
	old, young := store.NewCallID(now.Add(-store.UsageCallsKept-time.Minute)), store.NewCallID(now.Add(-time.Hour))
	one := store.TokenUsage{PromptTokens: 1, Extractions: 1}
	add := func(id store.CallID) {
		t.Helper()
		if _, err := w.cfg.Store.AddTurnUsage(ctx, "ann", store.StreamPosition{Seq: 1}, "ann", "m", store.Day(now), one, id); err != nil {
			t.Fatal(err)
		}
	}
	add(old)
	add(young)
	w.dropOldSpend(ctx)
	add(old)
	add(young)
	st, err := w.cfg.Store.Stats(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.LLMUsage["m"].PromptTokens; got != 3 {
		t.Errorf("ann's tokens after the cleanup and the calls recorded again: %d, want 3 (the old call's id deleted, the younger's kept)", got)
	}
}
