package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// change is the part of an outbox payload the tests compare.
type change struct {
	Seq      int64
	Type     string `json:"type"`
	Key      string `json:"key"`
	OldValue string `json:"old_value"`
	Value    string `json:"value"`
	EventID  string `json:"event_id"`
	ID       int64  `json:"id"`
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Count    int64  `json:"count"`
}

// drain sends (and so deletes) every committed change of the user and
// returns them in the order sent.
func drain(ctx context.Context, t *testing.T, s *store.Store, userID string) []change {
	t.Helper()
	var out []change
	for {
		n, err := s.SendChanges(ctx, userID, 0, 3, func(cs []store.Change) error {
			for _, c := range cs {
				var ch change
				if err := json.Unmarshal(c.Payload, &ch); err != nil {
					return err
				}
				if c.UserID != userID || c.At.IsZero() {
					t.Errorf("change %+v: wrong user or no time", c)
				}
				ch.Seq = c.Seq
				out = append(out, ch)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
	}
}

// checkSeqs fails unless the changes are numbered from first without a gap.
func checkSeqs(t *testing.T, cs []change, first int64) {
	t.Helper()
	for i, c := range cs {
		if c.Seq != first+int64(i) {
			t.Fatalf("change %d has seq %d, want %d: %+v", i, c.Seq, first+int64(i), cs)
		}
	}
}

// TestChangesOfEveryWrite: each write path leaves the changes it made, in
// order, with the old and new values of facts and the source event of an
// extracted one; the summaries stand for clear-all and import.
func TestChangesOfEveryWrite(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Paris", SourceAt: t0, EventID: "e1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Rome", SourceAt: t0.Add(time.Hour), EventID: "e2"}}); err != nil {
		t.Fatal(err)
	}
	// Restating the value changes nothing.
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Rome", SourceAt: t0.Add(2 * time.Hour), EventID: "e3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", SourceAt: t0.Add(3 * time.Hour), EventID: "e4", Op: store.FactDelete}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetFact(ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteFact(ctx, "alice", "name"); err != nil || n != 1 {
		t.Fatalf("delete fact: %d, %v", n, err)
	}
	id, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q1", Answer: "a1"})
	if err != nil {
		t.Fatal(err)
	}
	// The same pair again moves its time: the item comes again, so that a
	// cache walking context.list meanwhile does not miss it.
	if _, inserted, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q1", Answer: "a1"}); err != nil || inserted {
		t.Fatalf("store again: %v, %v", inserted, err)
	}
	answer := "a1 edited"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: id, Answer: &answer}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "q2", Answer: "a2", CreatedAt: t0, EventID: "e5"},
		{UserID: "alice", Question: "q3", Answer: "a3", CreatedAt: t0, EventID: "e5"},
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil || n != 2 {
		t.Fatalf("clear: %d, %v", n, err)
	}
	// A clear that deletes nothing changes nothing.
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	checkSeqs(t, got, 1)
	want := []change{
		{Type: "fact.set", Key: "location", Value: "Paris", EventID: "e1"},
		{Type: "fact.set", Key: "location", OldValue: "Paris", Value: "Rome", EventID: "e2"},
		{Type: "fact.removed", Key: "location", OldValue: "Rome", EventID: "e4"},
		{Type: "fact.set", Key: "name", Value: "Alice"},
		{Type: "fact.removed", Key: "name", OldValue: "Alice"},
		{Type: "context.stored", ID: id, Question: "q1", Answer: "a1"},
		{Type: "context.stored", ID: id, Question: "q1", Answer: "a1"},
		{Type: "context.updated", ID: id, Question: "q1", Answer: "a1 edited"},
		{Type: "context.deleted", ID: id},
		{Type: "context.stored", Question: "q2", Answer: "a2", EventID: "e5"},
		{Type: "context.stored", Question: "q3", Answer: "a3", EventID: "e5"},
		{Type: "context.cleared", Count: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		if want[i].ID == 0 && g.Type == "context.stored" {
			g.ID = 0 // InsertContext's ids are not known here
		}
		g.Seq = 0
		if g != want[i] {
			t.Errorf("change %d = %+v, want %+v", i, g, want[i])
		}
	}
	if again := drain(ctx, t, s, "alice"); len(again) != 0 {
		t.Fatalf("sent changes were not deleted: %+v", again)
	}

	// An import is one change; the export of bob's memory into carol.
	if _, _, err := s.SetFact(ctx, "bob", "name", "Bob"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "bob", Question: "q", Answer: "a"}); err != nil {
		t.Fatal(err)
	}
	var exp bytes.Buffer
	if err := s.Export(ctx, "bob", &exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, "carol", "carol", &exp); err != nil {
		t.Fatal(err)
	}
	imported := drain(ctx, t, s, "carol")
	if len(imported) != 1 || imported[0].Type != "memory.imported" || imported[0].Count < 2 || imported[0].Seq != 1 {
		t.Fatalf("import changes = %+v, want one memory.imported of at least 2 rows", imported)
	}
	if bob := drain(ctx, t, s, "bob"); len(bob) != 2 {
		t.Fatalf("bob's changes = %+v, want his fact and item", bob)
	}
}

// TestChangesOfRolledBackTransactionAreNeverThere: a transaction that
// rolls back leaves no change and no hole in seq.
func TestChangesOfRolledBackTransactionAreNeverThere(t *testing.T) {
	ctx, s := setup(t)
	boom := errors.New("boom")
	err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, _, err := q.SetFact(ctx, "alice", "name", "Alice"); err != nil {
			return err
		}
		if _, _, err := q.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: "a"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if _, _, err := s.SetFact(ctx, "alice", "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	if len(got) != 1 || got[0].Value != "Ada" || got[0].Seq != 1 {
		t.Fatalf("changes = %+v, want only Ada's, seq 1", got)
	}
}

// TestChangeNumberingOfOwnRows: the commit numbers exactly the rows its
// transaction inserted (migration 034 tracks their ids rather than scanning
// the outbox), over several statements and users, without the rows of a
// savepoint rolled back, and with a row whose id the tracking lost (as for a
// transaction begun before the migration), which its own firing numbers.
func TestChangeNumberingOfOwnRows(t *testing.T) {
	ctx, s := setup(t)
	set := func(q *store.Store, user, key, value string) error {
		_, _, err := q.SetFact(ctx, user, key, value)
		return err
	}
	err := s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		if err := set(q, "alice", "k1", "one"); err != nil {
			return err
		}
		if err := set(q, "bob", "k1", "uno"); err != nil {
			return err
		}
		sp, err := tx.Begin(ctx) // a savepoint
		if err != nil {
			return err
		}
		if err := set(s.WithTx(sp), "alice", "k2", "rolled back"); err != nil {
			return err
		}
		if err := sp.Rollback(ctx); err != nil {
			return err
		}
		if err := set(q, "alice", "k3", "three"); err != nil {
			return err
		}
		if err := set(q, "alice", "k4", "untracked"); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT set_config('memoryd.change_range', '', true)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another transaction's commit must not number or renumber these.
	if err := set(s, "carol", "k1", "x"); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	checkSeqs(t, got, 1)
	if len(got) != 3 || got[0].Key != "k1" || got[1].Key != "k3" || got[2].Key != "k4" {
		t.Fatalf("alice's changes = %+v, want k1, k3, k4", got)
	}
	for _, user := range []string{"bob", "carol"} {
		if got := drain(ctx, t, s, user); len(got) != 1 || got[0].Seq != 1 {
			t.Fatalf("%s's changes = %+v, want one, seq 1", user, got)
		}
	}
	var unnumbered int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM memory_changes WHERE seq IS NULL`).Scan(&unnumbered); err != nil || unnumbered != 0 {
		t.Fatalf("%d unnumbered changes after commit, %v", unnumbered, err)
	}
}

// TestChangeNumberingSkipsOthersRowsInItsRange: a commit numbers the id
// range its transaction wrote (migration 034), which holds rows of other
// transactions written meanwhile: one committed before it (already
// numbered) and one still open (not visible) keep their own numbering.
func TestChangeNumberingSkipsOthersRowsInItsRange(t *testing.T) {
	ctx, s := setup(t)
	begin := func() pgx.Tx {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) })
		return tx
	}
	set := func(q *store.Store, user, key string) {
		t.Helper()
		if _, _, err := q.SetFact(ctx, user, key, "v"); err != nil {
			t.Fatal(err)
		}
	}
	long, open := begin(), begin()
	set(s.WithTx(long), "alice", "first")
	set(s, "alice", "committed meanwhile") // seq 1
	set(s.WithTx(open), "alice", "still open")
	set(s.WithTx(long), "alice", "last")
	if err := long.Commit(ctx); err != nil { // seq 2 and 3
		t.Fatal(err)
	}
	if err := open.Commit(ctx); err != nil { // seq 4
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	checkSeqs(t, got, 1)
	var keys []string
	for _, c := range got {
		keys = append(keys, c.Key)
	}
	if want := []string{"committed meanwhile", "first", "last", "still open"}; fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("changes in seq order = %q, want %q", keys, want)
	}
}

// TestChangeSeqIsCommitOrder: a transaction that wrote first but commits
// last numbers its change after the one that committed before it.
func TestChangeSeqIsCommitOrder(t *testing.T) {
	ctx, s := setup(t)
	first, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, _, err := s.WithTx(first).StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "written first", Answer: "committed last"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "written second", Answer: "committed first"}); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	checkSeqs(t, got, 1)
	if len(got) != 2 || got[0].Question != "written second" || got[1].Question != "written first" || got[0].ID < got[1].ID {
		t.Fatalf("changes = %+v, want the second write (larger id) first", got)
	}
}

// TestChangeSeqUnderConcurrentWriters: many transactions writing one user
// at once number their changes 1..n without gap or repeat.
func TestChangeSeqUnderConcurrentWriters(t *testing.T) {
	ctx, s := setup(t)
	const writers, each = 4, 10
	var g errgroup.Group
	for w := range writers {
		g.Go(func() error {
			for i := range each {
				if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: fmt.Sprintf("%d.%d", w, i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	if len(got) != writers*each {
		t.Fatalf("%d changes, want %d", len(got), writers*each)
	}
	checkSeqs(t, got, 1)
}

// TestSendChangesKeepsUnsentAndLocksUser: a failed send deletes nothing;
// while one sender holds a user, another sends none of its changes.
func TestSendChangesKeepsUnsentAndLocksUser(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.SetFact(ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("nats down")
	if _, err := s.SendChanges(ctx, "alice", 0, 10, func([]store.Change) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("send error = %v, want %v", err, boom)
	}
	if n, err := s.PendingChanges(ctx); err != nil || n != 1 {
		t.Fatalf("pending after a failed send = %d, %v; want 1", n, err)
	}
	n, err := s.SendChanges(ctx, "alice", 0, 10, func([]store.Change) error {
		other, err := s.SendChanges(ctx, "alice", 0, 10, func([]store.Change) error {
			t.Error("a second sender got the user's changes")
			return nil
		})
		if err != nil || other != 0 {
			t.Errorf("second sender: %d, %v", other, err)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("send = %d, %v", n, err)
	}
	if n, err := s.PendingChanges(ctx); err != nil || n != 0 {
		t.Fatalf("pending after send = %d, %v", n, err)
	}
}

// TestForgetLeavesOnlyItsChange: a forget deletes the user's unsent
// changes and leaves its own, numbered after them (seq never goes back:
// a subscriber that missed the forget must not take later changes for
// duplicates); a reset leaves one summary per user.
func TestForgetLeavesOnlyItsChange(t *testing.T) {
	ctx, s := setup(t)
	for _, u := range []string{"alice", "bob"} {
		// The turn is recorded: a reset deletes only what a replay rebuilds.
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e-" + u, UserID: u, UserMessage: "hi", TurnAt: t0}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: u, Key: "location", Value: "Paris", SourceAt: t0, EventID: "e-" + u}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.SetFact(ctx, u, "name", u); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	got := drain(ctx, t, s, "alice")
	if len(got) != 1 || got[0].Type != "memory.forgotten" || got[0].Seq != 3 {
		t.Fatalf("alice's changes = %+v, want only memory.forgotten, seq 3", got)
	}
	if _, _, err := s.SetFact(ctx, "alice", "name", "Ada"); err != nil {
		t.Fatal(err)
	}
	if got := drain(ctx, t, s, "alice"); len(got) != 1 || got[0].Seq != 4 {
		t.Fatalf("alice's change after the forget = %+v, want seq 4", got)
	}
	if _, _, err := s.ResetMemory(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got = drain(ctx, t, s, "bob")
	if len(got) != 3 || got[2].Type != "memory.reset" || got[2].Seq != 3 {
		t.Fatalf("bob's changes = %+v, want his two facts then memory.reset", got)
	}
}

// TestSendDeletesOnlyWhatItSent: a forget that commits while a batch is
// being sent (after it was read) deletes the batch's rows and writes its
// own; the send's delete must leave the forget's change to be sent.
func TestSendDeletesOnlyWhatItSent(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.SetFact(ctx, "alice", "name", "Alice"); err != nil {
		t.Fatal(err)
	}
	n, err := s.SendChanges(ctx, "alice", 0, 10, func(cs []store.Change) error {
		if len(cs) != 1 {
			return fmt.Errorf("batch = %+v, want the fact", cs)
		}
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		return err
	})
	if err != nil || n != 1 {
		t.Fatalf("send = %d, %v", n, err)
	}
	got := drain(ctx, t, s, "alice")
	if len(got) != 1 || got[0].Type != "memory.forgotten" || got[0].Seq != 2 {
		t.Fatalf("alice's changes after the send = %+v, want memory.forgotten, seq 2", got)
	}
}

// TestDropChangesBoundsTheOutbox: changes older than the cut go unsent,
// but for each user's newest, which shows subscribers the gap. Before, a
// user whose last changes were dropped (an audit: a forget and a prune run
// while no serve ran, 355 changes) showed no gap at all, and a cache kept
// the forgotten user's memory.
func TestDropChangesBoundsTheOutbox(t *testing.T) {
	ctx, s := setup(t)
	for _, v := range []string{"Alice", "Alicia", "Ali"} {
		if _, _, err := s.SetFact(ctx, "alice", "name", v); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.SetFact(ctx, "bob", "name", "Bob"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DropChanges(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("drop of older than an hour = %d, %v; want 0", n, err)
	}
	if n, err := s.DropChanges(ctx, time.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("drop = %d, %v; want alice's 2 older changes", n, err)
	}
	if got := drain(ctx, t, s, "alice"); len(got) != 1 || got[0].Seq != 3 || got[0].Value != "Ali" {
		t.Fatalf("alice's changes sent after the drop: %+v, want her newest alone (seq 3: the gap)", got)
	}
	if got := drain(ctx, t, s, "bob"); len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("bob's changes sent after the drop: %+v, want his one", got)
	}
}

// TestChangeUsersPages: the users with committed changes waiting come in
// user id order after the cursor, a page at a time; a user whose changes
// were sent, and one whose transaction rolled back, are not among them.
func TestChangeUsersPages(t *testing.T) {
	ctx, s := context.Background(), storetest.New(t)
	for _, u := range []string{"carol", "alice", "dave", "bob"} {
		if _, _, err := s.SetFact(ctx, u, "name", u); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("rolled back")
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, _, err := q.SetFact(ctx, "aaron", "name", "Aaron"); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	drain(ctx, t, s, "dave")
	for _, tc := range []struct {
		after string
		limit int
		want  []string
	}{
		{"", 2, []string{"alice", "bob"}},
		{"bob", 2, []string{"carol"}},
		{"carol", 2, nil},
		{"", 10, []string{"alice", "bob", "carol"}},
		{"b", 1, []string{"bob"}},
	} {
		got, err := s.ChangeUsers(ctx, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ChangeUsers(%q, %d) = %v, want %v", tc.after, tc.limit, got, tc.want)
		}
	}
}

// TestQuietOperationSilencesOnlyItself: a clear of all of alice's items
// (one summary, its row changes silenced) in the same transaction as
// writes of bob and of alice after it: those writes are reported.
func TestQuietOperationSilencesOnlyItself(t *testing.T) {
	ctx, s := context.Background(), storetest.New(t)
	if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: "a1"}); err != nil {
		t.Fatal(err)
	}
	drain(ctx, t, s, "alice")
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, _, err := q.SetFact(ctx, "bob", "name", "Bob"); err != nil {
			return err
		}
		if _, err := q.DeleteContext(ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
			return err
		}
		if _, _, err := q.SetFact(ctx, "bob", "city", "Oslo"); err != nil {
			return err
		}
		_, _, err := q.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "q", Answer: "a2"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range append(drain(ctx, t, s, "alice"), drain(ctx, t, s, "bob")...) {
		got = append(got, fmt.Sprintf("%s %s%s", c.Type, c.Key, c.Answer))
	}
	want := []string{"context.cleared ", "context.stored a2", "fact.set name", "fact.set city"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
}

// A pair said again by a turn no newer than its item publishes nothing
// (the item's time stays, only the turns that said it grow); said again
// by a newer turn it comes again as context.stored, with the item's own
// event id (protocol.md, Memory changes).
func TestChangesOfAPairSaidAgain(t *testing.T) {
	ctx, s := setup(t)
	for _, w := range []store.ContextWrite{
		{UserID: "alice", Question: "q", Answer: "a", CreatedAt: t0.Add(time.Hour), EventID: "e1"},
		{UserID: "alice", Question: "q", Answer: "a", CreatedAt: t0, EventID: "e0"},
		{UserID: "alice", Question: "q", Answer: "a", CreatedAt: t0.Add(2 * time.Hour), EventID: "e2"},
	} {
		if _, err := s.InsertContext(ctx, []store.ContextWrite{w}); err != nil {
			t.Fatal(err)
		}
	}
	got := drain(ctx, t, s, "alice")
	if len(got) != 2 || got[0].Type != "context.stored" || got[1].Type != "context.stored" || got[0].EventID != "e1" || got[1].EventID != "e1" {
		t.Fatalf("changes = %+v, want two context.stored of e1's item (the first turn's and the newer one's)", got)
	}
}
