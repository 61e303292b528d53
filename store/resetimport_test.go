package store_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestImportBesideAResetOfEveryUserKeepsWhatItWrote: an import that
// rewrites rows a reset deletes (an extracted fact, list item or context
// item of the user's own recorded turns, taken over by the export's lines)
// and records their sources (import_sources, what a reset keeps), beside a
// reset of every user (replay --reset with no users, which takes no
// per-user lock). Whichever commits first, what the import reported
// written is there after both, and the reset still deletes the rest.
//
// With the import first, the reset's delete took its snapshot while the
// import held the rows, waited for them, and re-checked the rows the
// import had rewritten against that snapshot, where the import's sources
// were not yet: it deleted them, and the replay that followed could not
// bring them back (the user's own turn under that event id said something
// else). Now a reset of every user takes the reset lock exclusively and an
// import shares it: the two never interleave.
func TestImportBesideAResetOfEveryUserKeepsWhatItWrote(t *testing.T) {
	for _, typ := range []string{"fact", "fact_item", "context"} {
		for _, importFirst := range []bool{true, false} {
			name := typ + "/reset_first"
			if importFirst {
				name = typ + "/import_first"
			}
			t.Run(name, func(t *testing.T) { testImportBesideAReset(t, typ, importFirst) })
		}
	}
}

func testImportBesideAReset(t *testing.T, typ string, importFirst bool) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	later := t0.Add(time.Hour)
	// dave's own turns: e1 stated what his memory holds, e2 something
	// else (event ids are unique per user only), e3 a name the reset must
	// take (the replay extracts it again).
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "dave", UserMessage: "I live in Paris, I like chess", TurnAt: t0},
		{EventID: "e2", UserID: "dave", UserMessage: "What time is it?", TurnAt: t0},
		{EventID: "e3", UserID: "dave", UserMessage: "My name is Dave", TurnAt: t0},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, daveExtracted(t0, rules)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "dave", Question: "Where do I live?", Answer: "Paris",
		EventID: "e1", CreatedAt: t0, Provenance: rules}); err != nil {
		t.Fatal(err)
	}
	// bob's export, one line of typ, which takes over dave's row: a later
	// location from bob's e2, the chess item from bob's e2, or the pair
	// from bob's e1 at a later time (its item's event stays dave's e1).
	switch typ {
	case "fact":
		_, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "bob", Key: "location", Value: "Lisbon", SourceAt: later, EventID: "e2", Provenance: rules}})
		if err != nil {
			t.Fatal(err)
		}
	case "fact_item":
		_, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "bob", Key: "likes", Value: "chess", SourceAt: later, EventID: "e2", Op: store.FactAdd, List: true, Provenance: rules}})
		if err != nil {
			t.Fatal(err)
		}
	case "context":
		if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "bob", Question: "Where do I live?", Answer: "Paris",
			EventID: "e1", CreatedAt: later, Provenance: rules}); err != nil {
			t.Fatal(err)
		}
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}

	type importResult struct {
		counts store.Imported
		err    error
	}
	imported := make(chan importResult, 1)
	startImport := func() {
		go func() {
			counts, err := s.Import(ctx, "dave", "dave", bytes.NewReader(exp.Bytes()))
			imported <- importResult{counts, err}
		}()
	}
	startReset, reset := resetAll(ctx, s)
	// The first is held once it has written everything, before it commits
	// (an import's last write is its sources, a reset's its mark); the
	// second starts and waits for it; then the first goes on.
	if importFirst {
		holdFirst(t, s, "INSERT", "import_sources", startImport, startReset, "the import", "the reset")
	} else {
		holdFirst(t, s, "INSERT", "replay_resets", startReset, startImport, "the reset", "the import")
	}
	ir, rr := <-imported, <-reset
	if ir.err != nil || rr.err != nil {
		t.Fatalf("import: %v; reset: %v; want both done", ir.err, rr.err)
	}
	if ir.counts[typ] != 1 {
		t.Fatalf("the import wrote %d %s lines (%v), want the one", ir.counts[typ], typ, ir.counts)
	}

	// What the import said it wrote is there.
	switch typ {
	case "fact":
		if f, err := s.Fact(ctx, "dave", "location"); err != nil || f.Value != "Lisbon" || f.EventID != "e2" {
			t.Errorf("dave's location after the import and the reset: %+v, %v; want the imported Lisbon of e2", f, err)
		}
	case "fact_item":
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_items WHERE user_id = 'dave' AND key = 'likes' AND present AND event_id = 'e2'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if f, err := s.Fact(ctx, "dave", "likes"); n != 1 || err != nil || f.Value != "chess" {
			t.Errorf("dave's likes after the import and the reset: %d imported items, %+v, %v; want the imported chess of e2", n, f, err)
		}
	case "context":
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context WHERE user_id = 'dave' AND event_id = 'e1' AND created_at = $1`, later).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d of dave's items hold the imported pair after the import and the reset, want 1", n)
		}
	}
	// And the reset took what dave's own turns gave that the import did
	// not touch: the replay extracts it again.
	if f, err := s.Fact(ctx, "dave", "name"); err == nil {
		t.Errorf("dave's name after the reset: %+v; want it deleted (the replay extracts it again)", f)
	}
	if rr.removed.Facts == 0 {
		t.Errorf("the reset removed %+v; want dave's name at least", rr.removed)
	}
}

// resetResult is what a reset of every user returned.
type resetResult struct {
	removed store.Removed
	err     error
}

// resetAll returns a function starting a reset of every user in a
// goroutine of its own, and the channel its result arrives on.
func resetAll(ctx context.Context, s *store.Store) (start func(), done <-chan resetResult) {
	c := make(chan resetResult, 1)
	return func() {
		go func() {
			r, _, err := s.ResetMemory(ctx, nil)
			c <- resetResult{r, err}
		}()
	}, c
}

// holdFirst starts first and holds it at its first statement of verb on
// table (its last write, before it commits: holdStatements), then starts
// second and waits until second waits for a lock first holds; then lets
// first go on. The two transactions' order is then first's, whatever
// second's locks would have made of it.
func holdFirst(t *testing.T, s *store.Store, verb, table string, first, second func(), firstName, secondName string) {
	t.Helper()
	held := holdStatements(t, s, verb, table)
	first()
	held.waits(firstName + " to be held before it commits")
	second()
	waitBlockedBy(t, s, held, secondName+" to wait for "+firstName)
	held.release()
}

// waitBlockedBy waits until a backend waits for a lock the transaction
// held by h (its statement held, waiting on h's lock) holds.
func waitBlockedBy(t *testing.T, s *store.Store, h *statementHold, what string) {
	t.Helper()
	eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity w, pg_locks l
			WHERE l.locktype = 'advisory' AND NOT l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = $1
			  AND l.pid = ANY(pg_blocking_pids(w.pid))`, h.key).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
}

// daveExtracted is what extraction made of dave's turns at t0: his
// location and a list item from e1, his name from e3.
func daveExtracted(t0 time.Time, rules store.Provenance) []store.FactWrite {
	return []store.FactWrite{
		{UserID: "dave", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1", Provenance: rules},
		{UserID: "dave", Key: "likes", Value: "chess", SourceAt: t0, EventID: "e1", Op: store.FactAdd, List: true, Provenance: rules},
		{UserID: "dave", Key: "name", Value: "Dave", SourceAt: t0, EventID: "e3", Provenance: rules},
	}
}
