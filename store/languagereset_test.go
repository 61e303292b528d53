package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestLanguageChangeBesideAResetOfEveryUserDeadlocksNot: a language change
// (the user's items locked in id order, then re-indexed) beside a reset of
// every user (which deletes the extracted items in the table's order, and
// takes no per-user lock): an item said again lies after items of later
// ids, so the reset held a later item and waited for it while the change
// held it and waited for the later one, and Postgres failed one of the two
// (40P01): the replay --reset, or the language request with a 500. The
// change now waits for the reset (its lock shared, as every other writer
// of the tables the reset deletes from), or the reset for it.
//
// The test holds the said-again item (FOR KEY SHARE, which the change's
// lock passes and the reset's delete waits for) until the reset waits for
// it, then starts the change, waits until it waits, and lets go.
func TestLanguageChangeBesideAResetOfEveryUserDeadlocksNot(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "lena", UserMessage: "my dog is Rex", TurnAt: t0},
		{EventID: "e2", UserID: "lena", UserMessage: "I live in Porto", TurnAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	llm := store.Provenance{Extractor: "llm", Model: "m"}
	dog := store.ContextWrite{UserID: "lena", Question: "What is my dog called?", Answer: "Rex", EventID: "e1", CreatedAt: t0, Provenance: llm}
	ids, err := s.InsertContext(ctx, []store.ContextWrite{dog,
		{UserID: "lena", Question: "Where do I live?", Answer: "Porto", EventID: "e2", CreatedAt: t0, Provenance: llm}})
	if err != nil {
		t.Fatal(err)
	}
	// The dog pair said again later: its row's new version lies after the
	// Porto item's, whose id is higher.
	dog.CreatedAt = t0.Add(time.Hour)
	if _, err := s.InsertContext(ctx, []store.ContextWrite{dog}); err != nil {
		t.Fatal(err)
	}

	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(context.Background()) }()
	var holderPID int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT FROM context WHERE id = $1 FOR KEY SHARE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	startReset, reset := resetAll(ctx, s)
	startReset()
	// The reset has deleted the Porto item and waits for the dog's.
	resetPID := blockedBy(t, s, holderPID, func() bool { return false }, "the reset to wait for the held item")
	changed := make(chan error, 1)
	go func() {
		_, err := s.SetLanguage(ctx, "lena", "de", "german")
		changed <- err
	}()
	blockedBy(t, s, resetPID, func() bool { return len(changed) > 0 }, "the language change to wait for the reset")
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	rr, cerr := <-reset, <-changed
	if rr.err != nil || cerr != nil {
		t.Fatalf("reset: %v; language change: %v; want both done, one after the other", rr.err, cerr)
	}
}
