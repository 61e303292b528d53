package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestRecallFirstFactsInEveryShape: in every shape of recall statement
// (scoped, ranged, latest, hybrid, pruned, the rest of a pruned read) the
// facts of FirstFacts' keys are read first whatever their age, so that a
// cap of 1 returns the oldest, a core fact, rather than the most recent;
// and each shape still finds its candidates (its parameters are numbered
// as recall passes them).
func TestRecallFirstFactsInEveryShape(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "my bike is red", Answer: "nice bike", CreatedAt: t0, EventID: "e0"},
		store.ContextWrite{UserID: "alice", Question: "coffee", Answer: "ok", CreatedAt: t0.Add(time.Minute), EventID: "e1"},
	)
	writes := []store.FactWrite{{UserID: "alice", Key: "name", Value: "Ana", SourceAt: t0, EventID: "f0"}}
	for i := range 3 {
		writes = append(writes, store.FactWrite{UserID: "alice", Key: fmt.Sprintf("k%d", i), Value: "v", SourceAt: t0.Add(time.Duration(i+1) * time.Hour), EventID: fmt.Sprint("f", i+1)})
	}
	if _, err := s.UpsertFacts(ctx, writes); err != nil {
		t.Fatal(err)
	}
	kw := []string{"bike"}
	since, until := t0.Add(-time.Hour), t0.Add(time.Hour)
	for _, tc := range []struct {
		name string
		q    store.SearchQuery
		want int // candidates
	}{
		{"plain", store.SearchQuery{Keywords: kw}, 1},
		{"scoped", store.SearchQuery{Keywords: kw, Scope: "nowhere"}, 0},
		{"ranged", store.SearchQuery{Keywords: kw, Since: since, Until: until}, 1},
		{"scoped ranged", store.SearchQuery{Keywords: kw, Scope: "nowhere", Since: since, Until: until}, 0},
		{"latest", store.SearchQuery{Since: since, Until: until.Add(time.Hour), Latest: 5}, 2},
		{"scoped latest", store.SearchQuery{Scope: "nowhere", Since: since, Until: until, Latest: 5}, 0},
		{"hybrid", store.SearchQuery{Keywords: kw, Hybrid: true, VectorIDs: ids[1:]}, 2},
		{"scoped hybrid", store.SearchQuery{Keywords: kw, Scope: "nowhere", Hybrid: true, VectorIDs: ids[1:]}, 0},
		{"ranged hybrid", store.SearchQuery{Keywords: kw, Since: since, Until: until, Hybrid: true, VectorIDs: ids[1:]}, 2},
		{"scoped ranged hybrid", store.SearchQuery{Keywords: kw, Scope: "nowhere", Since: since, Until: until, Hybrid: true, VectorIDs: ids[1:]}, 0},
		{"pruned", store.SearchQuery{Keywords: kw, Prune: store.Prune{Share: 0.9, MinItems: 0}}, 1},
		{"rest", store.SearchQuery{Keywords: []string{"bike", "coffee"}, Prune: store.Prune{Except: []string{"bike"}}}, 1},
	} {
		tc.q.UserID = "alice"
		facts, c, err := s.Recall(ctx, store.RecallQuery{SearchQuery: tc.q, MaxFacts: 1, FirstFacts: []string{"name", "location"}})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(facts) != 1 || facts[0].Key != "name" {
			t.Errorf("%s: facts %+v, want the name alone", tc.name, facts)
		}
		if len(c.Matches) != tc.want {
			t.Errorf("%s: %d candidates, want %d", tc.name, len(c.Matches), tc.want)
		}
	}
}
