package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestFactProvenance: a fact keeps the turn, conversation and source time of
// the value current, wherever it is read (Fact, Facts, Recall); a direct
// write has no turn or conversation.
func TestFactProvenance(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "alice", Key: "city", Value: "Paris", SourceAt: t0, EventID: "e1", ConversationID: "c1"},
		{UserID: "alice", Key: "city", Value: "Rome", SourceAt: t0.Add(time.Hour), EventID: "e2", ConversationID: "c2"},
		{UserID: "alice", Key: "pet", Value: "cat", SourceAt: t0, EventID: "e1", ConversationID: "c1"},
	}); err != nil {
		t.Fatal(err)
	}
	f, err := s.Fact(ctx, "alice", "city")
	if err != nil {
		t.Fatal(err)
	}
	if f.Value != "Rome" || f.EventID != "e2" || f.ConversationID != "c2" || !f.SourceAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("fact = %+v, want Rome from e2 in c2 at %s", f, t0.Add(time.Hour))
	}
	facts, _, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "alice"}, MaxFacts: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 2 || facts[0].Key != "city" || facts[0].ConversationID != "c2" || facts[1].ConversationID != "c1" {
		t.Fatalf("recall facts = %+v", facts)
	}
	set, ok, err := s.SetFact(ctx, "alice", "city", "Lisbon")
	if err != nil || !ok {
		t.Fatalf("set fact = %+v, %v, %v", set, ok, err)
	}
	if set.EventID != "" || set.ConversationID != "" || set.SourceAt.IsZero() {
		t.Fatalf("direct write = %+v, want no turn or conversation and a source time", set)
	}
	list, err := s.Facts(ctx, "alice", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "city" || list[0].ConversationID != "" || list[1].ConversationID != "c1" {
		t.Fatalf("facts = %+v", list)
	}
}

func str(s string) *string { return &s }

func sameValue(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestKeyHistory: one key's changes newest first, each with its operation
// and its value's source, paged without gaps or repeats; other keys and
// other users are never listed.
func TestKeyHistory(t *testing.T) {
	ctx, s := setup(t)
	write := func(user, key, value string, at time.Time, event, conv string) {
		t.Helper()
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: user, Key: key, Value: value, SourceAt: at,
			EventID: event, ConversationID: conv}}); err != nil {
			t.Fatal(err)
		}
	}
	write("alice", "city", "Paris", t0, "e1", "c1")
	write("bob", "city", "Oslo", t0, "e1", "c9")
	write("alice", "pet", "cat", t0, "e1", "c1")
	write("alice", "city", "Rome", t0.Add(time.Hour), "e2", "c2")
	if _, err := s.DeleteFact(ctx, "alice", "city"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetFact(ctx, "alice", "city", "Lisbon"); err != nil {
		t.Fatal(err)
	}

	type want struct {
		op        string
		old, new  *string
		event     string
		conv      string
		sourceSet bool
	}
	wants := []want{
		{store.FactOpSet, nil, str("Lisbon"), "", "", true},
		{store.FactOpClear, str("Rome"), nil, "", "", false},
		{store.FactOpSet, str("Paris"), str("Rome"), "e2", "c2", true},
		{store.FactOpSet, nil, str("Paris"), "e1", "c1", true},
	}
	for _, limit := range []int{1, 2, 3, 4, 10} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var got []store.FactChange
			var before int64
			for page := 0; ; page++ {
				if page > len(wants) {
					t.Fatalf("more than %d pages", len(wants))
				}
				changes, next, err := s.KeyHistory(ctx, store.KeyHistoryQuery{UserID: "alice", Key: "city", Before: before, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if len(changes) > limit {
					t.Fatalf("page of %d changes, limit %d", len(changes), limit)
				}
				got = append(got, changes...)
				if next == 0 {
					break
				}
				if next != changes[len(changes)-1].ID {
					t.Fatalf("next = %d, want the page's last id %d", next, changes[len(changes)-1].ID)
				}
				before = next
			}
			if len(got) != len(wants) {
				t.Fatalf("%d changes, want %d: %+v", len(got), len(wants), got)
			}
			for i, w := range wants {
				c := got[i]
				if c.Key != "city" || c.Op != w.op || !sameValue(c.OldValue, w.old) || !sameValue(c.NewValue, w.new) ||
					c.EventID != w.event || c.ConversationID != w.conv || (c.SourceAt != nil) != w.sourceSet || c.ChangedAt.IsZero() {
					t.Errorf("change %d = %+v, want %+v", i, c, w)
				}
				if i > 0 && c.ID >= got[i-1].ID {
					t.Errorf("change %d has id %d, not older than %d", i, c.ID, got[i-1].ID)
				}
			}
			if src := got[3].SourceAt; src == nil || !src.Equal(t0) {
				t.Errorf("first change's source time = %v, want %s", src, t0)
			}
		})
	}
	none, next, err := s.KeyHistory(ctx, store.KeyHistoryQuery{UserID: "alice", Key: "nosuch", Limit: 5})
	if err != nil || len(none) != 0 || next != 0 {
		t.Fatalf("history of a key never set = %+v, %d, %v", none, next, err)
	}
	if _, _, err := s.KeyHistory(ctx, store.KeyHistoryQuery{UserID: "alice", Key: "city"}); err == nil {
		t.Fatal("a limit of 0 was accepted")
	}
	// History ids are bigint: a cursor past int4 (a busy database's, or a
	// frontend's guess) pages as any other.
	if all, _, err := s.KeyHistory(ctx, store.KeyHistoryQuery{UserID: "alice", Key: "city", Before: 1 << 31, Limit: 10}); err != nil || len(all) != 4 {
		t.Fatalf("history before 2^31: %d changes, %v; want all 4", len(all), err)
	}
}
