package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// waitClearBlocked polls until a clear of s's schema waits for its lock,
// failing after a generous bound.
func waitClearBlocked(t *testing.T, ctx context.Context, s *store.Store) {
	t.Helper()
	eventstest.Eventually(t, "a clear to wait for the write in flight", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks
			WHERE locktype = 'advisory' AND NOT granted AND classid::int = hashtext('memoryd.clear.' || current_schema())`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0, "no clear waits for the clear lock"
	})
}

// upsertCity writes alice's city as a turn's extraction does: value,
// stated at at by event.
func upsertCity(t *testing.T, ctx context.Context, s *store.Store, value string, at time.Time, event string) {
	t.Helper()
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: value, SourceAt: at, EventID: event,
		Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
		t.Fatal(err)
	}
}

// cityOf is alice's city, "<none>" when she has none.
func cityOf(t *testing.T, ctx context.Context, s *store.Store) string {
	t.Helper()
	f, err := s.Fact(ctx, "alice", "city")
	if errors.Is(err, store.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return f.Value
}

// TestFactClearIsDated: facts.clear is a dated operation. An extracted value
// whose source time is not later does not bring the fact back, whether its
// write lands after the clear or was in flight during it; a later turn and
// SetFact set it again.
func TestFactClearIsDated(t *testing.T) {
	ctx, s := setup(t)
	upsertCity(t, ctx, s, "Paris", t0, "e1")
	if n, err := s.DeleteFact(ctx, "alice", "city"); err != nil || n != 1 {
		t.Fatalf("clear = %d, %v; want 1 deleted", n, err)
	}
	// An earlier turn whose extraction ends after the clear.
	upsertCity(t, ctx, s, "London", t0.Add(time.Minute), "e2")
	if got := cityOf(t, ctx, s); got != "<none>" {
		t.Fatalf("after an earlier turn's value arrived: city = %s, want none (cleared)", got)
	}
	// Cleared again while nothing is stored: the clear still counts.
	if n, err := s.DeleteFact(ctx, "alice", "city"); err != nil || n != 0 {
		t.Fatalf("second clear = %d, %v; want 0 deleted", n, err)
	}
	upsertCity(t, ctx, s, "London", t0.Add(2*time.Minute), "e3")
	if got := cityOf(t, ctx, s); got != "<none>" {
		t.Fatalf("city = %s, want none", got)
	}

	// An extraction in flight during the clear (of a turn later than the
	// clears so far): its transaction has written, uncommitted, when the
	// clear comes; the clear waits and deletes it.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	upsertCity(t, ctx, s.WithTx(tx), "Rome", time.Now().Add(time.Second), "e4")
	done := make(chan error, 1)
	go func() {
		n, err := s.DeleteFact(ctx, "alice", "city")
		if err == nil && n != 1 {
			err = fmt.Errorf("deleted %d, want 1 (the value committed while the clear waited)", n)
		}
		done <- err
	}()
	waitClearBlocked(t, ctx, s)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("clear during extraction: %v", err)
	}
	if got := cityOf(t, ctx, s); got != "<none>" {
		t.Fatalf("after a clear during an extraction: city = %s, want none", got)
	}

	// A later turn sets it again; so does SetFact.
	upsertCity(t, ctx, s, "Oslo", time.Now().Add(time.Minute), "e5")
	if got := cityOf(t, ctx, s); got != "Oslo" {
		t.Fatalf("after a later turn: city = %s, want Oslo", got)
	}
	if _, err := s.DeleteFact(ctx, "alice", "pet"); err != nil {
		t.Fatal(err)
	}
	if f, stored, err := s.SetFact(ctx, "alice", "pet", "cat"); err != nil || !stored || f.Value != "cat" {
		t.Fatalf("set after a clear = %+v, %v, %v", f, stored, err)
	}
}

// TestContextClearIsDated: a context clear (all, by question, by id) keeps
// covered items it did not see from being inserted afterwards when their
// turn is not later; a later turn stores them again.
func TestContextClearIsDated(t *testing.T) {
	ctx, s := setup(t)
	insert := func(s *store.Store, q, a string, at time.Time) int64 {
		t.Helper()
		ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: q, Answer: a, CreatedAt: at}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0]
	}
	has := func(q, a string) bool {
		t.Helper()
		items, err := s.RecentContext(ctx, "alice", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if it.Question == q && it.Answer == a {
				return true
			}
		}
		return false
	}
	clear := func(d store.ContextDelete, want int64) {
		t.Helper()
		d.UserID = "alice"
		if n, err := s.DeleteContext(ctx, d); err != nil || n != want {
			t.Fatalf("clear %+v = %d, %v; want %d", d, n, err, want)
		}
	}

	insert(s, "Where do I live?", "Paris", t0)
	id2 := insert(s, "What is my dog called?", "Rex", t0)
	insert(s, "What is my dog called?", "Fido", t0)
	insert(s, "Bob's number?", "555", t0)

	// By question (spacing and case ignored): any answer to it.
	clear(store.ContextDelete{Question: "  where DO i\u00a0live? "}, 1)
	for _, a := range []string{"Paris", "Lisbon"} {
		if insert(s, "Where do I live?", a, t0.Add(time.Minute)) != 0 || has("Where do I live?", a) {
			t.Errorf("an earlier turn's %q brought the cleared question back", a)
		}
	}
	// By a question nothing matches yet (its turn is still being extracted).
	clear(store.ContextDelete{Question: "my car?"}, 0)
	if insert(s, "My  car?", "red", t0) != 0 {
		t.Error("an earlier turn's item for a question cleared before it was stored was inserted")
	}
	// By id: that pair only.
	clear(store.ContextDelete{ID: id2}, 1)
	if insert(s, "What is my dog called?", "Rex", t0.Add(time.Minute)) != 0 {
		t.Error("an earlier turn brought back the pair cleared by id")
	}
	if !has("What is my dog called?", "Fido") {
		t.Error("clear by id deleted another pair")
	}
	// All, with an insert in flight: it waits, then deletes that too.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if insert(s.WithTx(tx), "Favourite colour?", "green", t0) == 0 {
		t.Fatal("insert in flight: not inserted")
	}
	done := make(chan error, 1)
	go func() {
		n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true})
		if err == nil && n != 3 {
			err = fmt.Errorf("deleted %d, want 3", n)
		}
		done <- err
	}()
	waitClearBlocked(t, ctx, s)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("clear all during an insert: %v", err)
	}
	if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
		t.Fatalf("after clear all: %d items, %v", n, err)
	}
	if insert(s, "Bob's number?", "555", t0.Add(time.Hour)) != 0 || insert(s, "New question?", "x", t0) != 0 {
		t.Error("an earlier turn's item came back after clear all")
	}
	// Later turns store again, whatever was cleared.
	later := time.Now().Add(time.Minute)
	for _, qa := range [][2]string{{"Where do I live?", "Paris"}, {"What is my dog called?", "Rex"}, {"Bob's number?", "555"}, {"My car?", "red"}} {
		if insert(s, qa[0], qa[1], later) == 0 {
			t.Errorf("a later turn's %q was not stored", qa[0])
		}
	}
	// Another user is not affected.
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "bob", Question: "Where do I live?", Answer: "Paris", CreatedAt: t0}})
	if err != nil || ids[0] == 0 {
		t.Fatalf("bob's item: %v, %v", ids, err)
	}
}

// TestForgetDeletesClears: the record of a user's clears goes with forget,
// and survives a reset for replay.
func TestForgetDeletesClears(t *testing.T) {
	ctx, s := setup(t)
	count := func() int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM fact_clears WHERE user_id = 'alice') +
			(SELECT count(*) FROM context_clears WHERE user_id = 'alice')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := s.DeleteFact(ctx, "alice", "city"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.ContextDelete{{UserID: "alice", All: true}, {UserID: "alice", Question: "q"}} {
		if _, err := s.DeleteContext(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("clears recorded = %d, want 3", n)
	}
	if _, _, err := s.ResetMemory(ctx, []string{"alice"}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3 {
		t.Fatalf("clears after a reset = %d, want 3 (a replay must honour them)", n)
	}
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("clears after forget = %d, want 0", n)
	}
}

// TestClearCoversTurnsByStreamPosition: a clear made with the turn stream
// at sequence 10 (its last event, stored at last) covers the writes of
// turns at sequence 10 and below stored no later, however late they are
// stamped, and every turn stored before (a stream deleted before it was
// created again), and not a turn at 11, nor a turn at 5 of a stream of the
// same name created again after the clear (its sequences start over, its
// events stored later), nor a write without a sequence or a stored time.
func TestClearCoversTurnsByStreamPosition(t *testing.T) {
	ctx, s := setup(t)
	last := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC) // nanoseconds, as JetStream reports
	s.SetTurnStream(func(context.Context) (store.StreamPosition, error) {
		return store.StreamPosition{Seq: 10, Stored: last}, nil
	})
	if _, err := s.DeleteFact(ctx, "alice", "city"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	ahead := time.Now().UTC().Add(3 * time.Minute) // later than both clears
	prov := store.Provenance{Extractor: "rules"}
	for _, c := range []struct {
		name   string
		seq    uint64
		stored time.Time
		kept   bool
	}{
		{"at the clear's sequence", 10, last, false},
		{"below it", 5, last.Add(-time.Second), false},
		{"stored in the same microsecond, below it", 9, last.Add(100), false},
		{"after it", 11, last.Add(time.Millisecond), true},
		{"after it, in the same microsecond", 11, last.Add(1), true},
		{"of the stream created again", 5, last.Add(time.Hour), true},
		// A stream deleted before the clear's was created: every turn of
		// it was published before the clear, whatever its sequence.
		{"of a stream deleted before", 500, last.Add(-time.Hour), false},
		{"of an earlier release (no stored time)", 5, time.Time{}, true},
		{"without a sequence", 0, time.Time{}, true},
	} {
		const user = "alice"
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: user, Key: "city", Value: c.name, SourceAt: ahead, EventID: c.name,
			Placed: store.StreamPosition{Seq: c.seq, Stored: c.stored}, Provenance: prov}}); err != nil {
			t.Fatal(err)
		}
		ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: user, Question: "q " + c.name, Answer: "a", CreatedAt: ahead, EventID: c.name,
			Placed: store.StreamPosition{Seq: c.seq, Stored: c.stored}, Provenance: prov}})
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Fact(ctx, user, "city")
		factKept := err == nil && f.Value == c.name
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if factKept != c.kept || (ids[0] != 0) != c.kept {
			t.Errorf("turn %s: fact kept %v, context item kept %v; want %v", c.name, factKept, ids[0] != 0, c.kept)
		}
		// Back to the clears alone for the next case (a clear would record
		// the time of what it deleted).
		for _, table := range []string{"facts", "fact_items", "context"} {
			if _, err := s.Pool().Exec(ctx, `DELETE FROM `+table+` WHERE user_id = $1`, user); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestClearAfterATurnStampedAhead: a user's device runs 4 minutes fast, so
// an item carries a time ahead of the clock; the user clears everything.
// With the turn stream's position recorded, the clear covers that turn by
// its place (its replay stays cleared), and a turn published after the
// clear from a device with a right clock is stored (before, the clear took
// the deleted item's time and dropped every such turn for 4 minutes).
// Without a position, and for an import, the clear still takes the newest
// deleted time, so that the turn stamped ahead cannot come back.
func TestClearAfterATurnStampedAhead(t *testing.T) {
	last := time.Now().UTC().Add(-time.Second)
	prov := store.Provenance{Extractor: "rules"}
	for _, c := range []struct {
		name        string
		stream      bool
		laterStored bool // the right-clock turn after the clear is stored
	}{
		{"with the stream's position", true, true},
		{"without a position", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, s := setup(t)
			if c.stream {
				s.SetTurnStream(func(context.Context) (store.StreamPosition, error) {
					return store.StreamPosition{Seq: 10, Stored: last}, nil
				})
			}
			ahead := time.Now().UTC().Add(4 * time.Minute)
			fast := store.StreamPosition{Seq: 10, Stored: last}
			insert := func(answer string, at time.Time, event string, placed store.StreamPosition) int64 {
				t.Helper()
				ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Favourite mountain?", Answer: answer,
					CreatedAt: at, EventID: event, Placed: placed, Provenance: prov}})
				if err != nil {
					t.Fatal(err)
				}
				return ids[0]
			}
			insert("Etna", ahead, "fast", fast)
			backup := export(t, ctx, s, "alice") // made before the clear
			if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 1 {
				t.Fatalf("clear all = %d, %v", n, err)
			}
			// The turn stamped ahead, replayed: never back.
			if id := insert("Etna", ahead, "fast", fast); id != 0 {
				t.Fatal("the cleared turn stamped ahead came back by its replay")
			}
			// Nor by importing the backup.
			if _, err := s.Import(ctx, "alice", "alice", bytes.NewReader(backup)); err != nil {
				t.Fatal(err)
			}
			if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
				t.Fatalf("after importing the backup: %d items, %v; want the cleared one to stay out", n, err)
			}
			// A new turn, published after the clear, stamped right.
			after := store.StreamPosition{Seq: 11, Stored: last.Add(2 * time.Second)}
			if !c.stream {
				after = store.StreamPosition{}
			}
			if id := insert("Olympus", time.Now().UTC().Add(time.Second), "right", after); (id != 0) != c.laterStored {
				t.Fatalf("the right-clock turn after the clear: stored %v, want %v", id != 0, c.laterStored)
			}
		})
	}
}

// TestClearOwnTimeMerges: a clear's own time (by which positioned turns
// after it are judged) merges with another clear of the same key without
// losing what either covers: a clear made without a stream position (the
// stream could not be read) merged into one with a position still covers
// the replay of a turn stamped ahead that it deleted, and an imported
// clear (no position) merged into a local one raises the own time to its
// time, so the replay of a turn it deleted stays out.
func TestClearOwnTimeMerges(t *testing.T) {
	prov := store.Provenance{Extractor: "rules"}
	last := time.Now().UTC().Add(-time.Second)
	after := store.StreamPosition{Seq: 11, Stored: last.Add(time.Second)} // published after the first clear
	setupPositioned := func(t *testing.T) (context.Context, *store.Store, *atomic.Bool) {
		ctx, s := setup(t)
		var unreadable atomic.Bool
		s.SetTurnStream(func(context.Context) (store.StreamPosition, error) {
			if unreadable.Load() {
				return store.StreamPosition{}, nil // as serve does when JetStream does not answer
			}
			return store.StreamPosition{Seq: 10, Stored: last}, nil
		})
		if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
			t.Fatal(err)
		}
		return ctx, s, &unreadable
	}
	insert := func(t *testing.T, ctx context.Context, s *store.Store, at time.Time) int64 {
		t.Helper()
		ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Favourite mountain?", Answer: "Etna",
			CreatedAt: at, EventID: "e", Placed: after, Provenance: prov}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0]
	}
	t.Run("a clear without a position merged into one with", func(t *testing.T) {
		ctx, s, unreadable := setupPositioned(t)
		ahead := time.Now().UTC().Add(4 * time.Minute)
		if insert(t, ctx, s, ahead) == 0 {
			t.Fatal("the turn after the first clear was not stored")
		}
		unreadable.Store(true)
		if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 1 {
			t.Fatalf("second clear = %d, %v", n, err)
		}
		if insert(t, ctx, s, ahead) != 0 {
			t.Fatal("the replay of the turn stamped ahead came back after a clear without a position")
		}
	})
	t.Run("an imported clear merged into a local one", func(t *testing.T) {
		ctx, s, _ := setupPositioned(t)
		at := time.Now().UTC().Add(time.Second)
		if insert(t, ctx, s, at) == 0 {
			t.Fatal("the turn after the local clear was not stored")
		}
		line := header + `{"type":"context_clear","hash":"","cleared_at":"` + at.Add(time.Second).Format(time.RFC3339Nano) + `"}` + "\n"
		if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(line)); err != nil {
			t.Fatal(err)
		}
		if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
			t.Fatalf("after the import: %d items, %v; want its clear to delete the item", n, err)
		}
		if insert(t, ctx, s, at) != 0 {
			t.Fatal("the replay of a turn the imported clear deleted came back")
		}
	})
}

// TestClearCoversTheTurnReworded: a clear by id or by question covers any
// item extracted again from the deleted items' turns, however another
// model words it (a facts walk: a cleared item came back reworded after a
// model change and a replay); another turn's items, and another user's
// of the same event id, are stored; a later turn stores again.
func TestClearCoversTheTurnReworded(t *testing.T) {
	ctx, s := setup(t)
	insert := func(user, q, a, event string, at time.Time) bool {
		t.Helper()
		ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: user, Question: q, Answer: a, EventID: event, CreatedAt: at}})
		if err != nil {
			t.Fatal(err)
		}
		return ids[0] != 0
	}
	insert("ana", "What stretching routine suits Ana after climbing?", "Ten minutes of forearm stretches", "e1", t0)
	insert("ana", "Where does Ana climb?", "At the Lisbon gym", "e2", t0)
	insert("ana", "What does Ana cook?", "Lentil soup", "e3", t0)
	items, err := s.ListContext(ctx, "ana", store.ContextCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var stretch int64
	for _, it := range items {
		if it.EventID == "e1" {
			stretch = it.ID
		}
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", ID: stretch}); err != nil || n != 1 {
		t.Fatalf("clear by id: %d, %v", n, err)
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", Question: "What does Ana cook?"}); err != nil || n != 1 {
		t.Fatalf("clear by question: %d, %v", n, err)
	}
	for _, tt := range []struct {
		user, q, a, event string
		at                time.Time
		stored            bool
	}{
		{"ana", "Post-climbing stretches for Ana?", "10 minutes of forearm stretches", "e1", t0, false}, // reworded, the cleared turn
		{"ana", "Ana's usual dinner?", "A lentil soup", "e3", t0, false},                                // reworded, the question's turn
		{"ana", "Which gym does Ana climb at?", "The Lisbon one", "e2", t0, true},                       // a turn not cleared
		{"bob", "Post-climbing stretches for Bob?", "Shoulder rolls", "e1", t0, true},                   // another user's e1
		{"ana", "Post-climbing stretches for Ana?", "Yoga now", "e9", t0.Add(48 * time.Hour), true},     // said again later
	} {
		if got := insert(tt.user, tt.q, tt.a, tt.event, tt.at); got != tt.stored {
			t.Errorf("%s %q of %s: stored %v, want %v", tt.user, tt.q, tt.event, got, tt.stored)
		}
	}
}

// TestClearedTurnKeepsWhatWasNotCleared: a clear by id covers its item's
// turn extracted again, so the turn's other items, which no one cleared,
// cannot come back from a re-extraction: the reset before a replay and
// the re-extraction after a spend cap's reset must keep them, not delete
// what nothing rebuilds (a review: one item cleared of a turn of two, and
// after `replay --reset` with another model the user had neither).
func TestClearedTurnKeepsWhatWasNotCleared(t *testing.T) {
	rules := store.Provenance{Extractor: "rules", PromptVersion: "rules-v2"}
	llm := store.Provenance{Extractor: "llm", Model: "m2", PromptVersion: "llm-v2"}
	// A turn of two items, one of them cleared by id; and a turn of the
	// same user nothing cleared, which is extracted again as usual.
	start := func(t *testing.T) (context.Context, *store.Store) {
		t.Helper()
		ctx, s := setup(t)
		if _, err := s.InsertTurns(ctx, []store.Turn{
			{EventID: "e1", UserID: "ana", UserMessage: "I climb at the Lisbon gym and stretch my forearms after", TurnAt: t0},
			{EventID: "e2", UserID: "ana", UserMessage: "I cook lentil soup", TurnAt: t0.Add(time.Minute)},
		}); err != nil {
			t.Fatal(err)
		}
		ids, err := s.InsertContext(ctx, []store.ContextWrite{
			{UserID: "ana", Question: "What stretching routine suits Ana after climbing?", Answer: "Ten minutes of forearm stretches", EventID: "e1", CreatedAt: t0, Provenance: rules},
			{UserID: "ana", Question: "Where does Ana climb?", Answer: "At the Lisbon gym", EventID: "e1", CreatedAt: t0, Provenance: rules},
			{UserID: "ana", Question: "What does Ana cook?", Answer: "Lentil soup", EventID: "e2", CreatedAt: t0.Add(time.Minute), Provenance: rules},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkProcessed(ctx, "ana", []string{"e1", "e2"}, rules); err != nil {
			t.Fatal(err)
		}
		if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", ID: ids[0]}); err != nil || n != 1 {
			t.Fatalf("clear by id: %d, %v", n, err)
		}
		return ctx, s
	}
	// The other model's words for the three items.
	again := []store.ContextWrite{
		{UserID: "ana", Question: "Post-climbing stretches for Ana?", Answer: "10 minutes of forearm stretches", EventID: "e1", CreatedAt: t0, Provenance: llm},
		{UserID: "ana", Question: "Which gym does Ana climb at?", Answer: "The Lisbon one", EventID: "e1", CreatedAt: t0, Provenance: llm},
		{UserID: "ana", Question: "Ana's usual dinner?", Answer: "A lentil soup", EventID: "e2", CreatedAt: t0.Add(time.Minute), Provenance: llm},
	}
	check := func(t *testing.T, ctx context.Context, s *store.Store) {
		t.Helper()
		items, err := s.ListContext(ctx, "ana", store.ContextCursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var gym, stretch, soup int
		for _, it := range items {
			switch {
			case strings.Contains(it.Answer, "Lisbon"):
				gym++
			case strings.Contains(it.Answer, "stretches"):
				stretch++
			case strings.Contains(it.Answer, "soup"):
				soup++
			}
		}
		if gym != 1 || stretch != 0 || soup != 1 {
			t.Errorf("after the re-extraction: %d gym, %d stretch, %d soup item(s), want 1, 0, 1: %+v", gym, stretch, soup, items)
		}
	}
	t.Run("replay --reset", func(t *testing.T) {
		ctx, s := start(t)
		if _, _, err := s.ResetMemory(ctx, []string{"ana"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertContext(ctx, again); err != nil {
			t.Fatal(err)
		}
		check(t, ctx, s)
	})
	t.Run("re-extraction after a spend cap", func(t *testing.T) {
		ctx, s := start(t)
		if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.ReplaceOffline(ctx, store.Reextraction{UserID: "ana", EventIDs: []string{"e1", "e2"}, Offline: "rules", Provenance: llm, Context: again})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		check(t, ctx, s)
	})
}

// TestUpdateCoversTheTurnReworded: an update clears the replaced pair as
// a clear by id does (UpdateContext), its turn included: a replay after a
// model change does not store the old text again, reworded, beside the
// correction (as a clear by id brought it back before it covered the
// turn).
func TestUpdateCoversTheTurnReworded(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "What is Ana's dog called?", Answer: "Rex", EventID: "e1", CreatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	fixed := "Max"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "ana", ID: ids[0], Answer: &fixed}); err != nil {
		t.Fatal(err)
	}
	again, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "Name of Ana's dog?", Answer: "Rex", EventID: "e1", CreatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	if again[0] != 0 {
		t.Errorf("the replaced text, reworded from its turn, was stored again beside the correction (id %d)", again[0])
	}
}

// TestClearCoversEveryTurnThatSaidIt: a pair said in several turns is one
// item, and a clear of it (by id or by question) or an update covers each
// of those turns, not only the one that stored it: extracted again by
// another model, none of them brings the pair back reworded (it came back
// from the later turn). Said across batches, out of order, and within one
// batch.
func TestClearCoversEveryTurnThatSaidIt(t *testing.T) {
	const q, a = "What is Ana's dog called?", "Rex"
	says := func(event string, at time.Time) store.ContextWrite {
		return store.ContextWrite{UserID: "ana", Question: q, Answer: a, EventID: event, CreatedAt: at}
	}
	for _, batches := range []struct {
		name   string
		writes [][]store.ContextWrite
	}{
		{"two batches", [][]store.ContextWrite{{says("e1", t0)}, {says("e2", t0.Add(time.Hour))}}},
		{"later turn first", [][]store.ContextWrite{{says("e2", t0.Add(time.Hour))}, {says("e1", t0)}}},
		{"one batch", [][]store.ContextWrite{{says("e1", t0), says("e2", t0.Add(time.Hour))}}},
		{"said again by the same turns", [][]store.ContextWrite{{says("e1", t0)}, {says("e2", t0.Add(time.Hour))}, {says("e1", t0), says("e2", t0.Add(time.Hour))}}},
	} {
		for _, clear := range []string{"id", "question", "update"} {
			t.Run(batches.name+"/"+clear, func(t *testing.T) {
				ctx, s := setup(t)
				for _, w := range batches.writes {
					if _, err := s.InsertContext(ctx, w); err != nil {
						t.Fatal(err)
					}
				}
				items, err := s.ListContext(ctx, "ana", store.ContextCursor{}, 10)
				if err != nil || len(items) != 1 {
					t.Fatalf("one item expected: %+v, %v", items, err)
				}
				switch clear {
				case "id":
					_, err = s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", ID: items[0].ID})
				case "question":
					_, err = s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", Question: q})
				case "update":
					fixed := "Max"
					_, err = s.UpdateContext(ctx, store.ContextUpdate{UserID: "ana", ID: items[0].ID, Answer: &fixed})
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range []struct {
					event string
					at    time.Time
				}{{"e1", t0}, {"e2", t0.Add(time.Hour)}} {
					ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "Name of Ana's dog?", Answer: "Rex, a beagle", EventID: e.event, CreatedAt: e.at}})
					if err != nil {
						t.Fatal(err)
					}
					if ids[0] != 0 {
						t.Errorf("the cleared pair, reworded from turn %s, was stored again (id %d)", e.event, ids[0])
					}
				}
				ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "Name of Ana's dog?", Answer: "Rex, a beagle", EventID: "e3", CreatedAt: t0.Add(2 * time.Hour)}})
				if err != nil {
					t.Fatal(err)
				}
				if ids[0] == 0 {
					t.Error("a later turn saying it again was not stored")
				}
			})
		}
	}
}

// TestClearCoversTheLatestTurnsThatSaidIt: an item keeps the turn that
// stored it and the latest 64 others that said it again; a clear covers
// those, and a turn said before them is not covered (protocol.md, clear).
func TestClearCoversTheLatestTurnsThatSaidIt(t *testing.T) {
	ctx, s := setup(t)
	var w []store.ContextWrite
	for i := range 70 {
		w = append(w, store.ContextWrite{UserID: "ana", Question: "What is Ana's dog called?", Answer: "Rex", EventID: fmt.Sprintf("e%d", i), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	for i := 0; i < len(w); i += 7 {
		if _, err := s.InsertContext(ctx, w[i:min(i+7, len(w))]); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", Question: "What is Ana's dog called?"}); err != nil || n != 1 {
		t.Fatalf("clear: %d, %v", n, err)
	}
	for i, want := range map[int]bool{0: false, 1: true, 5: true, 6: false, 40: false, 69: false} {
		// A reworded pair from the turn, as another model extracts it again.
		ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "Name of Ana's dog?", Answer: fmt.Sprintf("Rex, a beagle (%d)", i), EventID: fmt.Sprintf("e%d", i), CreatedAt: w[i].CreatedAt}})
		if err != nil {
			t.Fatal(err)
		}
		if stored := ids[0] != 0; stored != want {
			t.Errorf("reworded from e%d: stored %v, want %v", i, stored, want)
		}
	}
}

// TestImportContextLinesOfOnePair: of several context lines of one pair
// in an import, the latest is the item, with its own turn and time, and
// the others' turns are kept as turns that said it: a clear of the item
// covers them too (a review: the first line's turn was kept, at the
// latest line's time).
func TestImportContextLinesOfOnePair(t *testing.T) {
	ctx, s := setup(t)
	line := func(q, a, event string, at time.Time) string {
		return fmt.Sprintf(`{"type":"context","question":%q,"answer":%q,"created_at":%q,"event_id":%q,"conversation_id":"c-%s","scope":"","extractor":"","model":"","prompt_version":""}`+"\n",
			q, a, at.Format(time.RFC3339Nano), event, event)
	}
	in := header +
		line("What car does Ana drive?", "A Golf", "e6", t0.Add(time.Hour)) +
		line("What car does Ana drive?", "A Golf", "e7", t0.Add(3*time.Hour)) +
		line("What car does Ana drive?", "A Golf", "e5", t0)
	if _, err := s.Import(ctx, "ana", "ana", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	items, err := s.ListContext(ctx, "ana", store.ContextCursor{}, 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("one item expected: %+v, %v", items, err)
	}
	car := items[0]
	if car.EventID != "e7" || car.ConversationID != "c-e7" || !car.CreatedAt.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("car = %s (%s) at %v, want e7 (c-e7) at %v: the latest line", car.EventID, car.ConversationID, car.CreatedAt, t0.Add(3*time.Hour))
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "ana", ID: car.ID}); err != nil {
		t.Fatal(err)
	}
	for i, e := range []string{"e5", "e6"} {
		again, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "ana", Question: "Ana's car?", Answer: "Golf", EventID: e, CreatedAt: t0.Add(time.Duration(i) * time.Hour)}})
		if err != nil {
			t.Fatal(err)
		}
		if again[0] != 0 {
			t.Errorf("the car, reworded from the line of %s, was stored again after its clear", e)
		}
	}
}
