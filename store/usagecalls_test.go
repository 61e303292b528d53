package store_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// TestCallUsageCountsOnce: a call's usage recorded again under its id
// (a save whose COMMIT lost its connection and committed, then the same
// calls flushed on their own) adds nothing, in the user's totals and in
// the day's counts; a call of a new id in the same batch is added; usage
// with no id is added every time.
func TestCallUsageCountsOnce(t *testing.T) {
	ctx, s := setup(t)
	day := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	now := time.Now()
	a, b, c := store.NewCallID(now), store.NewCallID(now), store.NewCallID(now)
	add := func(calls ...store.UsageCall) {
		t.Helper()
		if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			return q.AddCallUsageOn(ctx, day, "m", calls)
		}); err != nil {
			t.Fatal(err)
		}
	}
	one := store.TokenUsage{PromptTokens: 10, CompletionTokens: 5, Extractions: 1}
	add(store.UsageCall{ID: a, UserID: "alice", Used: one}, store.UsageCall{ID: b, UserID: "bob", Used: one})
	add(store.UsageCall{ID: a, UserID: "alice", Used: one}, store.UsageCall{ID: c, UserID: "alice", Used: one},
		store.UsageCall{ID: c, UserID: "alice", Used: one}) // c given twice in one batch
	add(store.UsageCall{ID: b, UserID: "bob", Used: one}) // all recorded before
	if _, err := s.AddTurnUsage(ctx, "alice", store.StreamPosition{Seq: 1}, "alice", "m", day, one, a); err != nil {
		t.Fatal(err)
	}
	add(store.UsageCall{UserID: "bob", Used: one}, store.UsageCall{UserID: "bob", Used: one}) // no ids
	for user, calls := range map[string]int64{"alice": 2, "bob": 3} {
		st, err := s.Stats(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		sp, err := s.SpendOn(ctx, day, user)
		if err != nil {
			t.Fatal(err)
		}
		if u := st.LLMUsage["m"]; u.PromptTokens != 10*calls || u.CompletionTokens != 5*calls || u.Extractions != calls || sp.User != 15*calls {
			t.Errorf("%s: usage %+v, %d tokens on the day; want %d calls' each once", user, u, sp.User, calls)
		}
	}
	if sp, err := s.SpendOn(ctx, day, ""); err != nil || sp.All != 15*5 {
		t.Errorf("everyone's tokens on the day: %+v, %v; want 5 calls' (%d)", sp, err, 15*5)
	}
}

// TestDeleteUsageCallsBefore: the ids of calls made before a time are
// deleted, the later kept; a call whose id was deleted counts again.
func TestDeleteUsageCallsBefore(t *testing.T) {
	ctx, s := setup(t)
	t1 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	old, recent := store.NewCallID(t1), store.NewCallID(t1.Add(time.Millisecond))
	if got := old.Time(); !got.Equal(t1) {
		t.Fatalf("a CallID made at %v says %v", t1, got)
	}
	if v := old[6] >> 4; v != 7 {
		t.Fatalf("CallID version %d, want 7", v)
	}
	one := store.TokenUsage{PromptTokens: 1, Extractions: 1}
	add := func(id store.CallID) {
		t.Helper()
		if _, err := s.AddTurnUsage(ctx, "alice", store.StreamPosition{Seq: 1}, "alice", "m", t1, one, id); err != nil {
			t.Fatal(err)
		}
	}
	add(old)
	add(recent)
	n, err := s.DeleteUsageCallsBefore(ctx, t1.Add(time.Millisecond))
	if err != nil || n != 1 {
		t.Fatalf("deleted %d, %v; want the older id", n, err)
	}
	add(old)    // its id deleted: counted again
	add(recent) // kept: not
	if st, err := s.Stats(ctx, "alice"); err != nil || st.LLMUsage["m"].PromptTokens != 3 {
		t.Fatalf("alice's usage %+v, %v; want 3 calls' (the deleted id's counted again)", st.LLMUsage, err)
	}
}

// TestForgottenUsersCallsCountInEveryones: the tokens of a call on turns a
// forget covers (a call in flight while its user was forgotten, stored
// after) count in everyone's count of the day, once, and in none of the
// user's: a forget keeps the user's share of everyone's count, which names
// no user, and their own spend starts again. Before, such a call counted
// nowhere, though the model server spent its tokens.
func TestForgottenUsersCallsCountInEveryones(t *testing.T) {
	ctx, s := setup(t)
	day := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	one := store.TokenUsage{PromptTokens: 10, CompletionTokens: 5, Extractions: 1}
	if _, err := s.AddTurnUsage(ctx, "alice", store.StreamPosition{Seq: 1}, "alice", "m", day, one, store.NewCallID(time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	inFlight, saved := store.NewCallID(time.Now()), store.NewCallID(time.Now())
	for range 2 { // the second time: recorded before, adds nothing
		added, err := s.AddTurnUsage(ctx, "alice", store.StreamPosition{Seq: 2}, "alice", "m", day, one, inFlight)
		if err != nil || added {
			t.Fatalf("usage of a forgotten turn: added %v, %v; want false (not the user's)", added, err)
		}
		// As a save adds it, the forget found by its lock.
		if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			return q.AddCallUsageOn(ctx, day, "m", []store.UsageCall{{ID: saved, UserID: "alice", Used: one, Forgotten: true}})
		}); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := s.SpendOn(ctx, day, "alice")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if sp.User != 0 || len(st.LLMUsage) != 0 {
		t.Errorf("alice's own count after her forget: %d tokens on the day, usage %+v; want none", sp.User, st.LLMUsage)
	}
	if sp.All != 3*15 {
		t.Errorf("everyone's tokens on the day: %d; want the forgotten call's, the in-flight one's and the saved one's, once each (%d)", sp.All, 3*15)
	}
}
