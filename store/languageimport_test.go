package store_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestImportBesideLanguageChangeDoesNotDeadlock: an import whose clears
// delete one of the user's items (its row locked) and whose context lines
// then insert a new item (the insert trigger takes the user's language
// lock, shared) ran beside a language change of the same user (the
// language lock, exclusive, then every item of the user re-indexed): the
// change waited for the deleted item's row, the import for the language
// lock, and Postgres broke the deadlock by failing one of them (40P01), an
// import or a language request answered with a 500 though nothing was
// wrong with either. Both complete, in either order.
func TestImportBesideLanguageChangeDoesNotDeadlock(t *testing.T) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	write := func(q, a string) int64 {
		t.Helper()
		id, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "hans", Question: q, Answer: a, CreatedAt: t0, Provenance: rules})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a := write("Which gate?", "Gate 9")
	write("Where is the boat?", "At the lake")
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "hans", ID: a}); err != nil {
		t.Fatal(err)
	}
	// The export holds a clear of the gate pair and the boat pair.
	var exp bytes.Buffer
	if err := s.Export(ctx, "hans", &exp); err != nil {
		t.Fatal(err)
	}
	// A fresh memory holding the gate pair (stamped before the exported
	// clear) and not the boat pair: the import deletes the one and inserts
	// the other.
	if _, _, err := s.ForgetUser(ctx, "hans", "hans", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	write("Which gate?", "Gate 9")

	var langDone <-chan error
	hooked := false
	hook := func() {
		hooked = true
		// In the import's transaction, the gate item deleted: the change
		// starts and waits for a lock (the item's row, or the language).
		langDone = languageChangeWaiting(t, s, "hans")
	}
	counts, err := s.Import(store.WithImportHook(ctx, hook), "hans", "hans", &exp)
	if !hooked {
		t.Fatalf("import: %v, before its hook ran", err)
	}
	langErr := <-langDone
	if err != nil || langErr != nil {
		t.Fatalf("import: %v; language change: %v; want both done", err, langErr)
	}
	if counts["context"] != 1 {
		t.Errorf("import wrote %d context items, want the boat pair", counts["context"])
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context WHERE user_id = 'hans' AND ts_config = 'german'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d of hans's items under german, want the boat pair (the gate pair was cleared)", n)
	}
}

// TestReextractionBesideLanguageChangeDoesNotDeadlock: the re-extraction
// of turns the offline extractor processed (ReplaceOffline, after a daily
// token cap) deletes the offline items of the turns (their rows locked)
// and then inserts the model's (the insert trigger takes the user's
// language lock, shared): beside a language change of the user (the lock
// exclusive, then every item re-indexed) the two waited for each other
// and Postgres failed one of them (40P01). Both complete.
func TestReextractionBesideLanguageChangeDoesNotDeadlock(t *testing.T) {
	ctx, s := setup(t)
	rules := store.Provenance{Extractor: "rules"}
	llm := store.Provenance{Extractor: "llm", Model: "m"}
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "hans", UserMessage: "Gate 9", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "hans", Question: "Which gate?", Answer: "Gate 9", EventID: "e1", CreatedAt: t0, Provenance: rules}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkProcessed(ctx, "hans", []string{"e1"}, rules); err != nil {
		t.Fatal(err)
	}
	// The re-extraction is held after its delete of the offline item.
	held := holdStatements(t, s, "DELETE", "context")
	reDone := make(chan error, 1)
	go func() {
		reDone <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "hans", EventIDs: []string{"e1"}, Offline: "rules", Provenance: llm,
				Context: []store.ContextWrite{{UserID: "hans", Question: "Which gate is it?", Answer: "Gate 9", EventID: "e1", CreatedAt: t0, Provenance: llm}}})
			return err
		})
	}()
	held.waits("the re-extraction to be held after its delete")
	langDone := languageChangeWaiting(t, s, "hans")
	held.release()
	if err, langErr := <-reDone, <-langDone; err != nil || langErr != nil {
		t.Fatalf("re-extraction: %v; language change: %v; want both done", err, langErr)
	}
	var q, config string
	if err := s.Pool().QueryRow(ctx, `SELECT question, ts_config FROM context WHERE user_id = 'hans'`).Scan(&q, &config); err != nil {
		t.Fatal(err)
	}
	if q != "Which gate is it?" || config != "german" {
		t.Errorf("hans's item %q under %s, want the model's under german", q, config)
	}
}

// languageChangeWaiting starts a change of the user's language to German
// and returns once it waits for a lock (the language lock, which it holds
// or waits for exclusively in this test's schema, or an item's row); its
// result comes on the channel returned.
func languageChangeWaiting(t *testing.T, s *store.Store, user string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.SetLanguage(context.Background(), user, "de", "german")
		done <- err
	}()
	eventstest.Eventually(t, "the language change to wait for a lock", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.mode = 'ExclusiveLock' AND a.wait_event_type = 'Lock'
			  AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('memoryd.language.' || current_schema() || '.' || $1::text, 0)`, user).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	return done
}

// TestForgetBesideLanguageChangeDoesNotDeadlock: a forget locks the
// user's items (deleteMemory) and then deletes the user's language row; a
// change of the user's language (the language lock, then its row
// updated, then every item re-indexed) beside it waited for a locked item
// while holding the row the forget then waited for: Postgres failed one of
// them (40P01), a forget or a language request answered with a 500. Both
// complete.
func TestForgetBesideLanguageChangeDoesNotDeadlock(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "hans", "fr", "french"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "hans", Question: "Which gate?", Answer: "Gate 9", CreatedAt: t0,
		Provenance: store.Provenance{Extractor: "rules"}}); err != nil {
		t.Fatal(err)
	}
	// The forget is held once it has locked the user's items.
	held := holdStatements(t, s, "DELETE", "context_terms")
	forgetDone := make(chan error, 1)
	go func() {
		_, _, err := s.ForgetUser(ctx, "hans", "hans", store.StreamPosition{})
		forgetDone <- err
	}()
	held.waits("the forget to be held with the items locked")
	langDone := languageChangeWaiting(t, s, "hans")
	held.release()
	if err, langErr := <-forgetDone, <-langDone; err != nil || langErr != nil {
		t.Fatalf("forget: %v; language change: %v; want both done", err, langErr)
	}
}

// statementHold holds the statements of one kind on one table of a
// test's schema once they are done, until released (holdStatements).
type statementHold struct {
	t       *testing.T
	s       *store.Store
	key     int64
	conn    *pgxpool.Conn
	release func()
}

// holdStatements holds every statement of event (DELETE, INSERT, ...) on
// table, in s's schema, once done and before its transaction goes on: a
// statement trigger waits for an advisory lock the test holds until
// release (at the test's end at the latest). For a race that one side
// must reach at a fixed point.
func holdStatements(t *testing.T, s *store.Store, event, table string) *statementHold {
	t.Helper()
	ctx := context.Background()
	h := &statementHold{t: t, s: s, key: rand.Int64()}
	var err error
	if h.conn, err = s.Pool().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h.conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, h.key); err != nil {
		h.conn.Release()
		t.Fatal(err)
	}
	released := false
	h.release = func() {
		if released {
			return
		}
		released = true
		if _, err := h.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, h.key); err != nil {
			t.Error(err)
		}
		h.conn.Release()
	}
	t.Cleanup(h.release)
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE TRIGGER test_hold AFTER %s ON %s FOR EACH STATEMENT EXECUTE FUNCTION test_hold()`, h.key, event, table)); err != nil {
		t.Fatal(err)
	}
	return h
}

// waits waits until a statement is held.
func (h *statementHold) waits(what string) {
	h.t.Helper()
	eventstest.Eventually(h.t, what, 30*time.Second, func() (bool, string) {
		var n int
		err := h.s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, h.key).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
}
