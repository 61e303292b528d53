package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// markIDs lists the ids of the unfinished resets.
func markIDs(t *testing.T, ctx context.Context, s *store.Store) []int64 {
	t.Helper()
	marks, err := s.UnfinishedResets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{}
	for _, m := range marks {
		ids = append(ids, m.ID)
	}
	return ids
}

// withTurns records a turn of each user: a reset marks only users it can
// take memory from.
func withTurns(t *testing.T, ctx context.Context, s *store.Store, users ...string) {
	t.Helper()
	for _, u := range users {
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e-" + u, UserID: u, UserMessage: "I live in Oslo", TurnAt: t0}}); err != nil {
			t.Fatal(err)
		}
	}
}

func reset(t *testing.T, ctx context.Context, s *store.Store, users ...string) store.ResetMark {
	t.Helper()
	_, m, err := s.ResetMemory(ctx, users)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID == 0 || m.Users != len(users) || m.StartedAt.IsZero() {
		t.Fatalf("reset of %q marked %+v", users, m)
	}
	return m
}

// TestResetMarksUntilTheReplayReadsBack: a reset leaves a mark that stays
// until its replay has read the stream back (FinishResets with its id), so
// that a replay that stopped half-way is known after it. A later replay
// from the start clears an earlier mark whose users it read (all of them,
// or the same users); a replay of other users, or one that did not read
// from the start, does not.
func TestResetMarksUntilTheReplayReadsBack(t *testing.T) {
	ctx, s := setup(t)
	withTurns(t, ctx, s, "alice", "bob", "dave")
	// A user with no recorded turn loses nothing to a reset: no mark.
	if _, m, err := s.ResetMemory(ctx, []string{"erin"}); err != nil || m.ID != 0 {
		t.Fatalf("a reset of a user without turns marked %+v, %v; want no mark", m, err)
	}
	all := reset(t, ctx, s)
	ab := reset(t, ctx, s, "alice", "bob")
	if got := markIDs(t, ctx, s); !slices.Equal(got, []int64{all.ID, ab.ID}) {
		t.Fatalf("marks %v, want %v", got, []int64{all.ID, ab.ID})
	}
	before, err := s.UnfinishedResets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		users []string
		whole bool
	}{
		{"a replay of alice only", []string{"alice"}, true},
		{"a replay of carol", []string{"carol"}, true},
		{"a replay of everyone since some time", nil, false},
	} {
		if n, err := s.FinishResets(ctx, 0, before, tc.users, tc.whole); err != nil || n != 0 {
			t.Errorf("%s cleared %d marks, %v; want none", tc.name, n, err)
		}
	}
	// The same users, named in another order, with another: ab's mark.
	if n, err := s.FinishResets(ctx, 0, before, []string{"carol", "bob", "alice"}, true); err != nil || n != 1 {
		t.Fatalf("a replay of carol, bob and alice cleared %d marks, %v; want 1", n, err)
	}
	if got := markIDs(t, ctx, s); !slices.Equal(got, []int64{all.ID}) {
		t.Fatalf("marks %v, want %v", got, []int64{all.ID})
	}
	// A reset that began after the replay is not its to clear.
	later := reset(t, ctx, s, "dave")
	if n, err := s.FinishResets(ctx, 0, before, nil, true); err != nil || n != 1 {
		t.Fatalf("a replay of everyone cleared %d marks, %v; want 1 (the one before it)", n, err)
	}
	if got := markIDs(t, ctx, s); !slices.Equal(got, []int64{later.ID}) {
		t.Fatalf("marks %v, want %v", got, []int64{later.ID})
	}
	// Its own replay clears it, whatever its scope (and does not count
	// it among the earlier resets it completed).
	if n, err := s.FinishResets(ctx, later.ID, nil, []string{"dave"}, false); err != nil || n != 0 {
		t.Fatalf("the reset's own replay completed %d earlier resets, %v; want 0", n, err)
	}
	if got := markIDs(t, ctx, s); len(got) != 0 {
		t.Fatalf("marks %v left", got)
	}
}

// TestForgetTakesTheUserOutOfResetMarks: a forget removes its user from the
// marks of unfinished resets (they hold a hash of each id, and nothing of
// the user may outlive the forget); a mark of that user alone goes. A mark
// of every user stays: the others still have only part of their memory.
func TestForgetTakesTheUserOutOfResetMarks(t *testing.T) {
	ctx, s := setup(t)
	withTurns(t, ctx, s, "alice", "bob")
	all := reset(t, ctx, s)
	alone := reset(t, ctx, s, "alice")
	pair := reset(t, ctx, s, "alice", "bob")
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	marks, err := s.UnfinishedResets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.ResetMark{{ID: all.ID, Users: 0, StartedAt: all.StartedAt}, {ID: pair.ID, Users: 1, StartedAt: pair.StartedAt}}
	if len(marks) != 2 || marks[0].ID != want[0].ID || marks[0].Users != 0 || marks[1].ID != want[1].ID || marks[1].Users != 1 {
		t.Fatalf("after forgetting alice, marks %+v; want %+v (%d, alice's alone, gone)", marks, want, alone.ID)
	}
	var held bool
	if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_resets WHERE sha256(convert_to('alice', 'UTF8')) = ANY(user_keys))`).Scan(&held); err != nil || held {
		t.Fatalf("a mark still holds alice's key (%v, %v)", held, err)
	}
	// bob's replay clears the pair's mark: alice is no longer in it.
	if n, err := s.FinishResets(ctx, 0, marks, []string{"bob"}, true); err != nil || n != 1 {
		t.Fatalf("bob's replay cleared %d marks, %v; want 1", n, err)
	}
	// A reset naming alice after her forget: she has no turns, so the
	// mark holds bob alone.
	if _, m, err := s.ResetMemory(ctx, []string{"alice", "bob"}); err != nil || m.ID == 0 || m.Users != 1 {
		t.Fatalf("a reset of alice and bob after alice's forget marked %+v, %v; want bob alone", m, err)
	}
	if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM replay_resets WHERE sha256(convert_to('alice', 'UTF8')) = ANY(user_keys))`).Scan(&held); err != nil || held {
		t.Fatalf("a mark made after alice's forget holds her key (%v, %v)", held, err)
	}
}
