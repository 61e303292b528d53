package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestRequeueLeavesATurnSavedBehindTheReset: an extraction whose
// transaction began before a `replay --reset` of its user committed, and
// whose save came after it (it waited for the reset's clear locks, or
// reached them later), keeps its items, which the reset did not see; the
// replay's requeue must leave the turn as processed. Its processed_at was
// the transaction's start, earlier than the reset's mark, so the turn was
// extracted again and the user kept two items for it (walk11: 13 of 672
// turns beside live ingest). A turn saved and committed before the reset
// lost its items to the reset and is requeued.
func TestRequeueLeavesATurnSavedBehindTheReset(t *testing.T) {
	ctx, s := setup(t)
	turns := []store.Turn{
		{EventID: "m1", UserID: "alice", UserMessage: "I moved to Lisbon in May.", TurnAt: t0},
		{EventID: "m2", UserID: "alice", UserMessage: "My sister is called Ana.", TurnAt: t0.Add(time.Minute)},
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	prov := store.Provenance{Extractor: "rules"}
	item := func(id, q, a string) []store.ContextWrite {
		return []store.ContextWrite{{UserID: "alice", Question: q, Answer: a, CreatedAt: t0, EventID: id, Provenance: prov}}
	}
	// m1's extraction saved and committed before the reset.
	if err := s.SaveMemory(ctx, nil, item("m1", "Where does alice live?", "Lisbon")); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"m1"}, prov); err != nil {
		t.Fatal(err)
	}
	// m2's began before the reset and saves after it.
	save, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = save.Rollback(ctx) }()
	if _, err := save.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	_, mark, err := s.ResetMemory(ctx, []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	q := s.WithTx(save)
	if err := q.SaveMemory(ctx, nil, item("m2", "What is alice's sister called?", "Ana")); err != nil {
		t.Fatal(err)
	}
	if err := q.MarkProcessed(ctx, "alice", []string{"m2"}, prov); err != nil {
		t.Fatal(err)
	}
	if err := save.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := s.RequeueTurns(ctx, turns, mark.Committed)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.EventID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("turns requeued after the reset: %v; want [m1] (its items went with the reset), not m2, whose items were saved after it", got)
	}
}
