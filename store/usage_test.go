package store_test

import (
	"fmt"
	"testing"
	"time"

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
		if _, err := s.AddTurnUsage(ctx, user, 1, user, "m", day, store.TokenUsage{PromptTokens: prompt, CompletionTokens: completion, Extractions: 1}); err != nil {
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

	if _, _, err := s.ForgetUser(ctx, "alice", "alice", 1, testJobs); err != nil {
		t.Fatal(err)
	}
	if got, want := spend(day1, "alice"), (store.Spend{User: 0, All: 45}); got != want {
		t.Errorf("after forgetting alice: %+v, want %+v (everyone's count keeps her tokens)", got, want)
	}

	n, err := s.DeleteSpendBefore(ctx, day2)
	if err != nil || n != 2 { // bob's and everyone's of day1
		t.Fatalf("DeleteSpendBefore = %d, %v; want 2 rows", n, err)
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

// BenchmarkSpendOn: the read every extraction job makes when a cap is set.
func BenchmarkSpendOn(b *testing.B) {
	s := storetest.New(b)
	ctx := b.Context()
	day := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		user := fmt.Sprintf("u%d", i)
		if _, err := s.AddTurnUsage(ctx, user, 1, user, "m", day, store.TokenUsage{PromptTokens: 10, Extractions: 1}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		if _, err := s.SpendOn(ctx, day, fmt.Sprintf("u%d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
}
