package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// generation reads the user's embedding generation through a hybrid recall
// and checks that UserVectors reads the same one.
func generation(t *testing.T, ctx context.Context, s *store.Store, user string) int64 {
	t.Helper()
	_, c, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: user, Hybrid: true}, MaxFacts: 1})
	if err != nil {
		t.Fatal(err)
	}
	uv, err := s.UserVectors(ctx, user, "m1")
	if err != nil {
		t.Fatal(err)
	}
	if uv.Generation != c.Generation {
		t.Fatalf("UserVectors generation %d, Recall's %d", uv.Generation, c.Generation)
	}
	return c.Generation
}

// TestEmbeddingGeneration: the generation a hybrid recall reads changes
// with every change to the user's usable vectors (a vector saved, an item
// edited, an item deleted) and with nothing of another user's; with no
// vector left it is 0 again, and a value is never reused.
func TestEmbeddingGeneration(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "q0", Answer: "a", CreatedAt: t0},
		{UserID: "alice", Question: "q1", Answer: "a", CreatedAt: t0},
		{UserID: "bob", Question: "q0", Answer: "a", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	changed := func(what string, before int64) int64 {
		t.Helper()
		g := generation(t, ctx, s, "alice")
		if g == before || g == 0 || seen[g] {
			t.Fatalf("after %s: generation %d (before %d, seen %v)", what, g, before, seen)
		}
		seen[g] = true
		return g
	}
	if g := generation(t, ctx, s, "alice"); g != 0 {
		t.Fatalf("generation %d before any vector, want 0", g)
	}
	saveAll(t, ctx, s, "alice", "m1", ids[:1])
	g := changed("first vector", 0)
	saveAll(t, ctx, s, "bob", "m1", ids[2:])
	if got := generation(t, ctx, s, "alice"); got != g {
		t.Fatalf("bob's vector changed alice's generation %d to %d", g, got)
	}
	saveAll(t, ctx, s, "alice", "m1", ids[1:2])
	g = changed("second vector", g)
	uv, err := s.UserVectors(ctx, "alice", "m1")
	first, second := min(ids[0], ids[1]), max(ids[0], ids[1]) // in id order
	if err != nil || len(uv.Vectors) != 2 || uv.Vectors[0].ContextID != first || !uv.Vectors[0].CreatedAt.Equal(t0) ||
		string(uv.Vectors[1].Vector) != string(vec(second, "m1")) || uv.Vectors[1].Dims != 3 {
		t.Fatalf("UserVectors %+v %v (ids %v)", uv, err, ids)
	}
	q := "q1 edited"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[1], Question: &q}); err != nil {
		t.Fatal(err)
	}
	g = changed("edit", g)
	if uv, _ := s.UserVectors(ctx, "alice", "m1"); len(uv.Vectors) != 1 {
		t.Fatalf("the edited item's stale vector is read: %+v", uv)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: ids[0]}); err != nil {
		t.Fatal(err)
	}
	g = changed("delete", g)
	saveAll(t, ctx, s, "alice", "m1", ids[1:2]) // the edited item embedded again
	g = changed("re-embed", g)
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	// The row stays, bumped: a trigger deciding "no vector left" from its
	// snapshot could miss a vector being saved beside it.
	g = changed("last vector deleted", g)
	more, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "q2", Answer: "a", CreatedAt: time.Now().Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	saveAll(t, ctx, s, "alice", "m1", more)
	changed("vector after none", g)
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if got := generation(t, ctx, s, "alice"); got != 0 {
		t.Fatalf("generation %d after forget, want 0 (no row)", got)
	}
	more, err = s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "q3", Answer: "a", CreatedAt: time.Now().Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	saveAll(t, ctx, s, "alice", "m1", more)
	changed("vector after forget", 0)
}

// TestHybridRecall: a hybrid recall's candidates are the keyword matches
// and the vector ids, only the user's, within scope and range; an id-only
// candidate holds no query term.
func TestHybridRecall(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "my dog is called Rex", Answer: "nice", CreatedAt: t0},
		{UserID: "alice", Question: "I like puppy formula food", Answer: "ok", CreatedAt: t0.Add(time.Hour)},
		{UserID: "alice", Question: "weather in Lisbon", Answer: "sunny", CreatedAt: t0.Add(48 * time.Hour)},
		{UserID: "bob", Question: "my cat", Answer: "Tom", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	matched := func(q store.SearchQuery) []int64 {
		t.Helper()
		q.UserID, q.Hybrid = "alice", true
		c, err := s.SearchContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, m := range c.Matches {
			got = append(got, m.Item.ID)
			if m.Item.UserID != "alice" || m.Item.Question == "" {
				t.Errorf("candidate %+v", m.Item)
			}
			if m.Item.ID == ids[0] && slices.ContainsFunc(m.Terms, func(n store.TermCount) bool { return n.Present }) {
				t.Errorf("the id-only candidate holds a term: %+v", m.Terms)
			}
		}
		slices.Sort(got)
		return got
	}
	if got := matched(store.SearchQuery{Keywords: []string{"puppy"}, VectorIDs: []int64{ids[0], ids[3]}}); !slices.Equal(got, ids[:2]) {
		t.Errorf("keyword and vector candidates %v, want %v (bob's id left out)", got, ids[:2])
	}
	if got := matched(store.SearchQuery{Keywords: []string{"puppy"}, VectorIDs: []int64{ids[1]}}); !slices.Equal(got, ids[1:2]) {
		t.Errorf("an id the keywords match too: %v, want it once", got)
	}
	if got := matched(store.SearchQuery{VectorIDs: []int64{ids[0]}}); !slices.Equal(got, ids[:1]) {
		t.Errorf("vector candidates without keywords %v, want %v", got, ids[:1])
	}
	if got := matched(store.SearchQuery{Keywords: []string{"weather"}, VectorIDs: []int64{ids[0]}, Since: t0.Add(time.Hour)}); !slices.Equal(got, ids[2:3]) {
		t.Errorf("ranged candidates %v, want %v", got, ids[2:3])
	}
	if got := matched(store.SearchQuery{Keywords: []string{"weather"}, VectorIDs: []int64{ids[0]}, Scope: "work"}); len(got) != 0 {
		t.Errorf("scoped candidates %v, want none", got)
	}
	if got := matched(store.SearchQuery{}); len(got) != 0 {
		t.Errorf("candidates %v with neither keywords nor ids", got)
	}
}

// TestUserVectorsOfTheRecordedDimensions: UserVectors reads only vectors of
// the dimensions recorded for the model; others (stored by an earlier
// release when a job's halves were answered by two models) count as
// missing. Before, a query of their size compared with them.
func TestUserVectorsOfTheRecordedDimensions(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "q0", Answer: "a", CreatedAt: t0},
		{UserID: "alice", Question: "q1", Answer: "a", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := s.EmbeddingDims(ctx, "m1", 3); err != nil || d != 3 {
		t.Fatalf("EmbeddingDims = %d, %v", d, err)
	}
	targets, err := s.EmbeddingTargets(ctx, "alice", ids, "m1")
	if err != nil || len(targets) != 2 {
		t.Fatalf("targets %v, %v", targets, err)
	}
	if _, err := s.SaveEmbeddings(ctx, "m1", []store.EmbeddingWrite{
		{ContextID: targets[0].ID, ContentHash: targets[0].ContentHash, Dims: 3, Vector: vec(targets[0].ID, "m1")},
		{ContextID: targets[1].ID, ContentHash: targets[1].ContentHash, Dims: 2, Vector: []byte("xy")},
	}); err != nil {
		t.Fatal(err)
	}
	uv, err := s.UserVectors(ctx, "alice", "m1")
	if err != nil || len(uv.Vectors) != 1 || uv.Vectors[0].ContextID != targets[0].ID || uv.Vectors[0].Dims != 3 {
		t.Fatalf("UserVectors %+v, %v; want only the vector of 3 dimensions, the recorded ones", uv, err)
	}
}
