package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// An extraction's save of several users' turns (a job enqueued before
// migration 012) wrote the facts (UpsertFacts) and then the items
// (InsertContext), each taking the clear locks of its own writes' users:
// with facts of bob alone and items of alice and bob, it held bob's and
// then asked for alice's, where a reset of both (a replay's) takes alice's
// and then bob's, exclusively. Each held the lock the other waited for and
// Postgres failed one of them (40P01). The save takes every user's clear
// lock first, in the order a reset takes them (SaveMemory).
//
// The test forces the interleaving: a third transaction holds alice's
// clear lock, the reset is started and waits for it, the save is started
// and runs until it waits (for alice's lock, behind the reset), then the
// third transaction ends. Both must succeed.
func TestSaveOfTwoUsersBesideResetOfBoth(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "alice", UserMessage: "Gate 9", TurnAt: past},
		{EventID: "e2", UserID: "bob", UserMessage: "Tea", TurnAt: past},
	}); err != nil {
		t.Fatal(err)
	}
	prov := store.Provenance{Extractor: "rules"}
	facts := []store.FactWrite{{UserID: "bob", Key: "drink", Value: "tea", SourceAt: past, EventID: "e2", Provenance: prov}}
	items := []store.ContextWrite{
		{UserID: "alice", Question: "Which gate?", Answer: "Gate 9", EventID: "e1", CreatedAt: past, Provenance: prov},
		{UserID: "bob", Question: "Which drink?", Answer: "Tea", EventID: "e2", CreatedAt: past, Provenance: prov},
	}

	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('memoryd.clear.' || current_schema()), hashtext('alice'))`); err != nil {
		t.Fatal(err)
	}
	resetter, reset := waitingOn(t, s, holder, "the reset", "alice's clear lock", func() error {
		_, _, err := s.ResetMemory(ctx, []string{"alice", "bob"})
		return err
	})
	saved := make(chan error, 1)
	go func() {
		saved <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			return q.SaveMemory(ctx, facts, items)
		})
	}()
	if blockedBy(t, s, resetter, func() bool { return len(saved) > 0 }, "the save to wait for the reset") == 0 {
		t.Fatalf("the save did not wait for the reset: %v", <-saved)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rerr, serr := <-reset, <-saved; rerr != nil || serr != nil {
		t.Fatalf("reset: %v; save: %v; want both done", rerr, serr)
	}
	// The reset committed first (the save waited for it): the save's
	// memory is there.
	if n, err := s.CountContext(ctx, "alice"); err != nil || n != 1 {
		t.Fatalf("alice's items: %d (%v), want 1", n, err)
	}
	if f, err := s.Fact(ctx, "bob", "drink"); err != nil || f.Value != "tea" {
		t.Fatalf("bob's drink: %+v (%v), want tea", f, err)
	}
}
