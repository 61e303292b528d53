package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestRefusedEmbeddingsCountItemsWithoutAVector: the metrics' count of
// refused items (CountRefusedEmbeddings) is the stats' (CountEmbeddings'
// Refused): items refused for their current text that have no vector of
// it. An item refused, then embedded (a retry of its job once the server
// took longer texts, or a serve of the release before 065, whose sweep
// sends refused texts again), keeps its refusal row: it is not counted
// as refused by either. Before, the gauge counted it for good, while
// stats said none.
func TestRefusedEmbeddingsCountItemsWithoutAVector(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "q1", Answer: "a", CreatedAt: t0},
		{UserID: "alice", Question: "q2", Answer: "a", CreatedAt: t0},
		{UserID: "bob", Question: "q3", Answer: "a", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	var rs []store.EmbeddingRefusal
	for i, id := range ids {
		ts, err := s.EmbeddingTargets(ctx, []string{"alice", "alice", "bob"}[i], []int64{id}, "m1")
		if err != nil || len(ts) != 1 {
			t.Fatalf("targets of %d: %v %v", id, ts, err)
		}
		rs = append(rs, store.EmbeddingRefusal{ContextID: id, ContentHash: ts[0].ContentHash})
	}
	if n, err := s.SaveEmbeddingRefusals(ctx, "m1", rs); err != nil || n != 3 {
		t.Fatalf("saved %d refusals (%v), want 3", n, err)
	}
	// The first item embedded after all (by a job of a release before
	// 065, whose targets leave no refused item out).
	if _, err := s.SaveEmbeddings(ctx, "m1", []store.EmbeddingWrite{{ContextID: ids[0], ContentHash: rs[0].ContentHash, Dims: 3, Vector: vec(ids[0], "m1")}}); err != nil {
		t.Fatal(err)
	}
	// A refused item is no embed job's target.
	if ts, err := s.EmbeddingTargets(ctx, "alice", ids[:2], "m1"); err != nil || len(ts) != 0 {
		t.Errorf("targets %v (%v), want none: one embedded, one refused", ts, err)
	}
	if c, err := s.CountEmbeddings(ctx, "alice", "m1"); err != nil || c != (store.EmbeddingCount{Items: 2, Embedded: 1, Refused: 1}) {
		t.Errorf("alice's count %+v (%v), want 2 items, 1 embedded, 1 refused", c, err)
	}
	if n, err := s.CountRefusedEmbeddings(ctx, "m1"); err != nil || n != 2 {
		t.Errorf("refused items of m1: %d (%v), want 2 (alice's second, bob's): the embedded one is not", n, err)
	}
	// A user's retry forgets their refusals only.
	if n, err := s.ForgetEmbeddingRefusals(ctx, "alice", "m1"); err != nil || n != 2 {
		t.Errorf("forgot %d of alice's refusals (%v), want 2", n, err)
	}
	if c, err := s.CountEmbeddings(ctx, "bob", "m1"); err != nil || c.Refused != 1 {
		t.Errorf("bob's count %+v (%v), want his refusal kept", c, err)
	}
}
