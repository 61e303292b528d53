package store_test

import (
	"maps"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestResetDropsExtractedClears: a reset before a replay drops the clears
// the earlier extraction made (its deletes and list sets), so the replay,
// maybe by another model, ends as it would on a fresh user; the clears of
// direct writes (facts.clear, facts.set of a list) stay and still hold.
func TestResetDropsExtractedClears(t *testing.T) {
	ctx, s := setup(t)
	// The earlier extraction, and the user's own writes.
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{set("city", "Porto", 1, "e1"), del("city", false, 3, "e3"),
		add("allergies", "shellfish", 2, "e2"), setItem("allergies", "peanuts", 3, "e3"), set("diet", "vegan", 1, "e1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteFact(ctx, "alice", "diet"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	// The replay's extraction says less: no delete of city, no list set.
	replay := []store.FactWrite{set("city", "Porto", 1, "e1"), add("allergies", "shellfish", 2, "e2"), add("allergies", "peanuts", 3, "e3"),
		set("diet", "vegan", 1, "e1")}
	if _, err := s.UpsertFacts(ctx, replay); err != nil {
		t.Fatal(err)
	}
	// diet stays cleared: facts.clear was the user's own.
	want := map[string]string{"city": "Porto", "allergies": "peanuts, shellfish"}
	if got := values(t, ctx, s, "alice"); !maps.Equal(got, want) {
		t.Errorf("after reset and replay: %v, want %v", got, want)
	}
}
