package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

func setup(t *testing.T) (context.Context, *store.Store) {
	t.Helper()
	t.Parallel()
	return context.Background(), storetest.New(t)
}

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func TestInsertTurnsIsIdempotent(t *testing.T) {
	ctx, s := setup(t)
	turn := store.Turn{EventID: "e1", UserID: "alice", UserMessage: "hi", TurnAt: t0, Metadata: []byte(`{"k":1}`)}
	out, err := s.InsertTurns(ctx, []store.Turn{turn, {EventID: "e2", UserID: "alice", UserMessage: "yo", TurnAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []store.TurnOutcome{store.TurnInserted, store.TurnInserted}) {
		t.Fatalf("first insert: got %v, want 2 inserted", out)
	}
	out, err = s.InsertTurns(ctx, []store.Turn{turn})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, []store.TurnOutcome{store.TurnDuplicate}) {
		t.Fatalf("redelivered turn: %v, want a duplicate", out)
	}
	got, err := s.GetTurn(ctx, "alice", "e1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusPending || got.UserMessage != "hi" || string(got.Metadata) != `{"k": 1}` {
		t.Fatalf("stored turn = %+v", got)
	}
}

func TestOlderFactNeverOverwritesNewer(t *testing.T) {
	ctx, s := setup(t)
	write := func(value string, at time.Time, event string) {
		t.Helper()
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: value, SourceAt: at, EventID: event}}); err != nil {
			t.Fatal(err)
		}
	}
	write("Paris", t0.Add(2*time.Hour), "e3")
	write("Berlin", t0.Add(time.Hour), "e2") // older: must not win
	write("Rome", t0, "e1")
	f, err := s.Fact(ctx, "alice", "location")
	if err != nil {
		t.Fatal(err)
	}
	if f.Value != "Paris" || f.EventID != "e3" {
		t.Fatalf("fact = %q from %s, want Paris from e3", f.Value, f.EventID)
	}
	write("Lisbon", t0.Add(3*time.Hour), "e4")
	hist, err := s.FactHistory(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].OldValue != nil || *hist[0].NewValue != "Paris" || *hist[1].OldValue != "Paris" || *hist[1].NewValue != "Lisbon" {
		t.Fatalf("history = %+v, want insert Paris then Paris->Lisbon", hist)
	}
	if n, err := s.DeleteFact(ctx, "alice", "location"); err != nil || n != 1 {
		t.Fatalf("delete = %d, %v", n, err)
	}
	if _, err := s.Fact(ctx, "alice", "location"); err == nil {
		t.Fatal("fact still there after delete")
	}
	hist, _ = s.FactHistory(ctx, "alice")
	if last := hist[len(hist)-1]; last.NewValue != nil || *last.OldValue != "Lisbon" {
		t.Fatalf("delete not recorded in history: %+v", last)
	}
}

func TestFactBatchKeepsLatestPerKey(t *testing.T) {
	ctx, s := setup(t)
	_, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "u", Key: "name", Value: "Bob", SourceAt: t0.Add(time.Minute), EventID: "b"},
		{UserID: "u", Key: "name", Value: "Robert", SourceAt: t0, EventID: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Fact(ctx, "u", "name")
	if err != nil || f.Value != "Bob" {
		t.Fatalf("fact = %+v, %v; want Bob", f, err)
	}
}

func TestSameContextKeptForTwoUsers(t *testing.T) {
	ctx, s := setup(t)
	item := func(user, q, a string) store.ContextWrite {
		return store.ContextWrite{UserID: user, Question: q, Answer: a, CreatedAt: t0, EventID: "e-" + user}
	}
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		item("alice", "What is my dog called?", "Rex"),
		item("bob", "What is my dog called?", "Rex"),
		item("alice", "  what is MY dog   called? ", "rex"), // normalised duplicate in the same batch
	})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] == 0 || ids[1] == 0 || ids[2] != 0 {
		t.Fatalf("ids = %v, want two inserts and one duplicate", ids)
	}
	ids, err = s.InsertContext(ctx, []store.ContextWrite{item("bob", "what is my dog called?", "REX")})
	if err != nil || ids[0] != 0 {
		t.Fatalf("re-insert for bob: ids %v, err %v; want duplicate", ids, err)
	}
	for _, u := range []string{"alice", "bob"} {
		n, err := s.CountContext(ctx, u)
		if err != nil || n != 1 {
			t.Fatalf("%s has %d items (%v), want 1", u, n, err)
		}
	}
}

func TestContentHash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b [3]string
		same bool
	}{
		{"case and space", [3]string{"u", "Hello  World", "x"}, [3]string{"u", "hello world ", "X"}, true},
		{"other user", [3]string{"u1", "q", "a"}, [3]string{"u2", "q", "a"}, false},
		{"separator shift", [3]string{"u", "ab", "c"}, [3]string{"u", "a", "bc"}, false},
		{"user into question", [3]string{"ua", "b", "c"}, [3]string{"u", "ab", "c"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha := store.ContentHash(tt.a[0], tt.a[1], tt.a[2])
			hb := store.ContentHash(tt.b[0], tt.b[1], tt.b[2])
			if (string(ha) == string(hb)) != tt.same {
				t.Fatalf("same = %v, want %v", string(ha) == string(hb), tt.same)
			}
		})
	}
}

func TestTurnLifecycleAndStats(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "a", UserID: "alice", UserMessage: "1", TurnAt: t0},
		{EventID: "b", UserID: "alice", UserMessage: "2", TurnAt: t0},
		{EventID: "c", UserID: "bob", UserMessage: "3", TurnAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		turns, err := q.LockUnprocessedTurns(ctx, "alice", []string{"a", "b"})
		if err != nil {
			return err
		}
		if len(turns) != 2 {
			t.Errorf("locked %d turns, want 2", len(turns))
		}
		return q.MarkProcessed(ctx, "alice", []string{"a"}, store.Provenance{Extractor: "rules"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, "alice", []string{"a", "b"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st.TurnsReceived != 2 || st.TurnsProcessed != 1 || st.TurnsFailed != 1 || st.LastProcessedAt == nil {
		t.Fatalf("alice stats = %+v", st)
	}
	failed, err := s.FailedTurns(ctx, "", 10)
	if err != nil || len(failed) != 1 || failed[0].EventID != "b" || failed[0].LastError != "boom" {
		t.Fatalf("failed turns = %+v, %v", failed, err)
	}
	reset, err := s.ResetFailed(ctx, []store.TurnKey{{UserID: "alice", EventID: "a"}, {UserID: "alice", EventID: "b"}, {UserID: "bob", EventID: "c"}, {UserID: "bob", EventID: "b"}})
	if err != nil || len(reset) != 1 || reset[0] != (store.TurnKey{UserID: "alice", EventID: "b"}) {
		t.Fatalf("reset = %v, %v", reset, err)
	}
}
