package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestExtractionBesideAResetOfEveryUserDeadlocksNot: an extraction's
// writes (UpsertFacts) beside a reset of every user (which takes no
// per-user lock): the extraction waits for the reset, or the reset for it. The extraction records a value
// delete (fact_value_clears) and then a clear (fact_clears); the reset
// deletes fact_clears and then fact_value_clears: in opposite orders, the
// reset waited for the value clear the extraction held, and the
// extraction for the clear the reset had deleted, a deadlock that failed
// one of them (40P01: the reset, when it waited first). Both now take the
// reset lock first.
func TestExtractionBesideAResetOfEveryUserDeadlocksNot(t *testing.T) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "dave", UserMessage: "I am not a baker, and I have no pet", TurnAt: t0},
		{EventID: "e2", UserID: "dave", UserMessage: "Still not a baker, still no pet", TurnAt: t0.Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	// e1's extraction: a value delete (fact_value_clears) and a clear
	// (fact_clears), the rows the next extraction and the reset meet.
	say := func(at time.Time, event string) []store.FactWrite {
		return []store.FactWrite{
			{UserID: "dave", Key: "job", Value: "baker", Op: store.FactDelete, SourceAt: at, EventID: event, Provenance: rules},
			{UserID: "dave", Key: "pet", Op: store.FactDelete, SourceAt: at, EventID: event, Provenance: rules},
		}
	}
	if _, err := s.UpsertFacts(ctx, say(t0, "e1")); err != nil {
		t.Fatal(err)
	}

	// e2's extraction is held after its value delete (which raised the
	// row e1's made: locked to its commit), before its clear.
	held := holdStatements(t, s, "INSERT", "fact_value_clears")
	extracted := make(chan error, 1)
	go func() {
		_, err := s.UpsertFacts(ctx, say(t0.Add(time.Hour), "e2"))
		extracted <- err
	}()
	held.waits("the extraction to be held after its value delete")
	startReset, reset := resetAll(ctx, s)
	startReset()
	// The reset waits for the extraction: at its delete of the value
	// clears (having deleted fact_clears), or, taking the lock the
	// extraction shares, at its start.
	waitBlockedBy(t, s, held, "the reset to wait for the extraction")
	held.release()
	xerr, rr := <-extracted, <-reset
	if xerr != nil || rr.err != nil {
		t.Fatalf("extraction: %v; reset: %v; want both done (one waiting for the other)", xerr, rr.err)
	}
}

// TestEmbeddingSaveWaitsForAResetOfEveryUser: a save of vectors beside a
// reset of every user waits for the reset (its lock shared, before any
// item is locked) and then saves what the reset left. Before, the save
// locked its items in id order while the reset deleted them in the
// table's order (an edited item sits later than its id): each could hold
// a row the other waited for, and Postgres failed one of them (40P01).
func TestEmbeddingSaveWaitsForAResetOfEveryUser(t *testing.T) {
	ctx, s := setup(t)
	_, ws := aliceWrites(t, ctx, s, 3)
	startReset, reset := resetAll(ctx, s)
	saved := make(chan saveResult, 1)
	holdFirst(t, s, "DELETE", "fact_value_clears", startReset, func() {
		go func() {
			n, err := s.SaveEmbeddings(ctx, "m", ws)
			saved <- saveResult{n, err}
		}()
	}, "the reset", "the save")
	if rr := <-reset; rr.err != nil {
		t.Fatalf("reset: %v", rr.err)
	}
	// The items were written directly (no turn): the reset keeps them.
	if res := <-saved; res.err != nil || res.n != 3 {
		t.Fatalf("save after the reset: %d saved, %v; want the 3 items it kept", res.n, res.err)
	}
}
