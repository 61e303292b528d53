package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestDailySpend: token usage counts towards the day it is added on, per
// user and for everyone; a forget removes the user's counts and keeps
// everyone's; old days are deleted; Stats reports today's tokens.
func TestDailySpend(t *testing.T) {
	ctx, s := setup(t)
	day1 := time.Date(2026, 11, 21, 23, 59, 0, 0, time.UTC)
	day2 := day1.Add(2 * time.Minute)
	add := func(user string, day time.Time, prompt, completion int64) {
		t.Helper()
		if _, err := s.AddTurnUsage(ctx, user, store.StreamPosition{Seq: 1}, user, "m", day, store.TokenUsage{PromptTokens: prompt, CompletionTokens: completion, Extractions: 1}, store.CallID{}); err != nil {
			t.Fatal(err)
		}
	}
	add("alice", day1, 10, 5)
	add("alice", day1, 20, 0)
	add("bob", day1, 7, 3)
	add("alice", day2, 1, 1)
	spend := func(day time.Time, user string) store.Spend {
		t.Helper()
		sp, err := s.SpendOn(ctx, day, user)
		if err != nil {
			t.Fatal(err)
		}
		return sp
	}
	for _, tc := range []struct {
		day  time.Time
		user string
		want store.Spend
	}{
		{day1, "alice", store.Spend{User: 35, All: 45}},
		{day1.Add(-23 * time.Hour), "bob", store.Spend{User: 10, All: 45}}, // any time of the day
		{day1, "", store.Spend{User: 0, All: 45}},
		{day1, "carol", store.Spend{User: 0, All: 45}},
		{day2, "alice", store.Spend{User: 2, All: 2}},
		{day2.AddDate(0, 0, 1), "alice", store.Spend{}},
	} {
		if got := spend(tc.day, tc.user); got != tc.want {
			t.Errorf("SpendOn(%s, %q) = %+v, want %+v", tc.day, tc.user, got, tc.want)
		}
	}

	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{Seq: 1}, testJobs); err != nil {
		t.Fatal(err)
	}
	if got, want := spend(day1, "alice"), (store.Spend{User: 0, All: 45}); got != want {
		t.Errorf("after forgetting alice: %+v, want %+v (everyone's count keeps her tokens)", got, want)
	}

	// bob's row and everyone's of day1: one shard of the total, or two when
	// alice's and bob's shards differ.
	var shards int64
	if err := s.Pool().QueryRow(ctx, `SELECT count(DISTINCT hashtext(u) & 15) FROM unnest(ARRAY['alice', 'bob']) AS u`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteSpendBefore(ctx, day2)
	if err != nil || n != 1+shards {
		t.Fatalf("DeleteSpendBefore = %d, %v; want %d rows", n, err, 1+shards)
	}
	if got := spend(day1, "bob"); got != (store.Spend{}) {
		t.Errorf("day1 after deleting it: %+v", got)
	}

	// Stats reads today by the database's clock; AddUsage counts on it.
	if err := s.AddUsage(ctx, "dave", "m", store.TokenUsage{PromptTokens: 4, CompletionTokens: 2, Extractions: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, "dave")
	if err != nil || st.TokensToday != 6 {
		t.Fatalf("dave's stats = %+v, %v; want 6 tokens today", st, err)
	}
}

// TestDailySpendOfOtherUsersDoesNotWait: a job adding its tokens in its
// save transaction does not wait for another user's job still holding its
// own add (everyone's count is sharded by user, migration 032); before,
// both wrote the one row of everyone's count, so every save queued behind
// the commit of the one before it. The second add runs with a lock timeout:
// waiting for the first transaction fails it with SQLSTATE 55P03 (as the
// code before migration 032 did).
func TestDailySpendOfOtherUsersDoesNotWait(t *testing.T) {
	ctx, s := setup(t)
	var today string // by the database's clock, which Stats reads
	if err := s.Pool().QueryRow(ctx, `SELECT ((now() AT TIME ZONE 'UTC')::date)::text`).Scan(&today); err != nil {
		t.Fatal(err)
	}
	day, err := time.Parse(time.DateOnly, today)
	if err != nil {
		t.Fatal(err)
	}
	shard := func(user string) (n int) {
		t.Helper()
		if err := s.Pool().QueryRow(ctx, `SELECT hashtext($1) & 15`, user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	other := ""
	for i := 0; other == ""; i++ {
		if u := fmt.Sprintf("u%d", i); shard(u) != shard("alice") {
			other = u
		}
	}
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			if err := q.AddUsageOn(ctx, day, "m", map[string]store.TokenUsage{"alice": {PromptTokens: 5, Extractions: 1}}); err != nil {
				return err
			}
			close(holding)
			<-release
			return nil
		})
	}()
	<-holding
	err = s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return err
		}
		return q.AddUsageOn(ctx, day, "m", map[string]store.TokenUsage{other: {PromptTokens: 7, Extractions: 1}})
	})
	close(release)
	if err != nil {
		t.Fatalf("%s's add while alice's is uncommitted: %v", other, err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]store.Spend{"alice": {User: 5, All: 12}, other: {User: 7, All: 12}, "": {All: 12}} {
		if got, err := s.SpendOn(ctx, day, user); err != nil || got != want {
			t.Errorf("SpendOn(%q) = %+v, %v; want %+v", user, got, err, want)
		}
	}
	if st, err := s.Stats(ctx, ""); err != nil || st.TokensToday != 12 {
		t.Errorf("everyone's tokens today = %d, %v; want 12 (the sum of the shards)", st.TokensToday, err)
	}
}

// BenchmarkSpendOn: the read every extraction job makes when a cap is set.
func BenchmarkSpendOn(b *testing.B) {
	s := storetest.New(b)
	ctx := b.Context()
	day := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		user := fmt.Sprintf("u%d", i)
		if _, err := s.AddTurnUsage(ctx, user, store.StreamPosition{Seq: 1}, user, "m", day, store.TokenUsage{PromptTokens: 10, Extractions: 1}, store.CallID{}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.SpendOn(ctx, day, fmt.Sprintf("u%d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplaceOfflineListItems: the model's re-extraction of turns the
// offline extractor processed replaces the list items the offline extractor
// stated in them, keeps the items of other turns and extractors, and
// rebuilds a list whose items were all the offline extractor's.
func TestReplaceOfflineListItems(t *testing.T) {
	ctx, s := setup(t)
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	var turns []store.Turn
	for i, id := range []string{"e0", "e1", "e2"} {
		turns = append(turns, store.Turn{EventID: id, UserID: "alice", UserMessage: "m " + id, TurnAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	rules := store.Provenance{Extractor: "rules", PromptVersion: "rules-v2"}
	llm := store.Provenance{Extractor: "llm", Model: "m", PromptVersion: "llm-v2"}
	w := func(id string, op store.FactOp, key, value string, p store.Provenance) store.FactWrite {
		i := int(id[1] - '0')
		return store.FactWrite{UserID: "alice", Key: key, Value: value, Op: op, List: true, EventID: id,
			SourceAt: t0.Add(time.Duration(i) * time.Minute), Provenance: p}
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{w("e0", store.FactAdd, "allergies", "eggs", llm)}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"e0"}, llm); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		w("e1", store.FactAdd, "allergies", "peanuts", rules), w("e2", store.FactAdd, "allergies", "soy", rules),
		w("e1", store.FactSet, "languages", "English", rules),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"e1", "e2"}, rules); err != nil {
		t.Fatal(err)
	}
	err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "alice", EventIDs: []string{"e1"}, Offline: "rules", Provenance: llm,
			Facts: []store.FactWrite{w("e1", store.FactAdd, "allergies", "tree nuts", llm), w("e1", store.FactAdd, "languages", "Portuguese", llm)}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"allergies": "eggs, soy, tree nuts", "languages": "Portuguese"} {
		f, err := s.Fact(ctx, "alice", key)
		if err != nil || f.Value != want {
			t.Errorf("%s = %q, %v; want %q", key, f.Value, err, want)
		}
	}
}
