package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestListContextPagingIsStable walks a user's items page by page while
// items are inserted between pages, some newer than every item, some as old
// as the page boundary, some older than all: every item present from the
// start is listed exactly once, in (created_at, id) descending order, and
// another user's items never appear.
func TestListContextPagingIsStable(t *testing.T) {
	ctx, s := setup(t)
	var writes []store.ContextWrite
	for i := range 25 {
		// Three items share each created_at, so ties are decided by id.
		at := t0.Add(time.Duration(i/3) * time.Minute)
		writes = append(writes,
			store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: at},
			store.ContextWrite{UserID: "bob", Question: fmt.Sprintf("q%d", i), Answer: "a", CreatedAt: at})
	}
	if _, err := s.InsertContext(ctx, writes); err != nil {
		t.Fatal(err)
	}
	initial := map[int64]bool{}
	all, err := s.ListContext(ctx, "alice", store.ContextCursor{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range all {
		initial[it.ID] = true
	}
	if len(initial) != 25 {
		t.Fatalf("alice has %d items, want 25", len(initial))
	}

	seen := map[int64]int{}
	var (
		after store.ContextCursor
		prev  *store.ContextItem
		extra int
	)
	for page := 0; ; page++ {
		items, err := s.ListContext(ctx, "alice", after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			break
		}
		for i := range items {
			it := items[i]
			if it.UserID != "alice" {
				t.Fatalf("page %d holds %s's item %d", page, it.UserID, it.ID)
			}
			if prev != nil && (it.CreatedAt.After(prev.CreatedAt) || it.CreatedAt.Equal(prev.CreatedAt) && it.ID >= prev.ID) {
				t.Errorf("item %d (%s) listed after item %d (%s): not newest first", it.ID, it.CreatedAt, prev.ID, prev.CreatedAt)
			}
			seen[it.ID]++
			prev = &it
		}
		last := items[len(items)-1]
		after = store.ContextCursor{CreatedAt: last.CreatedAt, ID: last.ID}
		// Concurrent inserts between pages: newer than all, at the
		// boundary's own time (a larger id, so before the cursor), and
		// older than all (after the cursor: listed later, once).
		for _, at := range []time.Time{t0.Add(time.Hour), last.CreatedAt, t0.Add(-time.Hour)} {
			extra++
			if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("new %d", extra), CreatedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
		if page > 100 {
			t.Fatal("the walk does not end")
		}
	}
	for id := range initial {
		if seen[id] != 1 {
			t.Errorf("item %d present from the start was listed %d times, want 1", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %d listed %d times", id, n)
		}
	}
}

// TestContextByIDIsPerUser: get, update and delete by id find only the
// user's own items; another user's id is not found and stays untouched,
// with both users' calls interleaved.
func TestContextByIDIsPerUser(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "dog?", Answer: "Rex", CreatedAt: t0},
		{UserID: "bob", Question: "dog?", Answer: "Fido", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	aliceID, bobID := ids[0], ids[1]
	q := "cat?"
	for _, c := range []struct {
		user, other string
		id          int64
	}{{"alice", "bob", bobID}, {"bob", "alice", aliceID}} {
		if _, err := s.ContextByID(ctx, c.user, c.id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s gets %s's item: %v, want ErrNotFound", c.user, c.other, err)
		}
		if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: c.user, ID: c.id, Question: &q}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s updates %s's item: %v, want ErrNotFound", c.user, c.other, err)
		}
		if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: c.user, ID: c.id}); err != nil || n != 0 {
			t.Errorf("%s deletes %s's item: %d, %v; want 0", c.user, c.other, n, err)
		}
	}
	for user, id := range map[string]int64{"alice": aliceID, "bob": bobID} {
		it, err := s.ContextByID(ctx, user, id)
		if err != nil || it.Question != "dog?" {
			t.Errorf("%s's item after the other's calls: %+v, %v", user, it, err)
		}
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: aliceID}); err != nil || n != 1 {
		t.Fatalf("alice deletes her item: %d, %v", n, err)
	}
	if _, err := s.ContextByID(ctx, "bob", bobID); err != nil {
		t.Errorf("bob's item after alice deleted hers: %v", err)
	}
}

// TestUpdateContextDedup: an update re-hashes the item, so the new text is
// what dedup compares; an update onto another item's pair fails with a
// DuplicateError and changes nothing; a case-only change of the item's own
// pair is allowed; the replaced pair does not come back from a replay of its
// turn; and search finds the new text, not the old.
func TestUpdateContextDedup(t *testing.T) {
	ctx, s := setup(t)
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: "dog?", Answer: "Rex", CreatedAt: t0, EventID: "e1"},
		{UserID: "alice", Question: "cat?", Answer: "Tom", CreatedAt: t0.Add(time.Minute), EventID: "e2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	dog, cat := ids[0], ids[1]

	q, a := "Dog?", "Rex"
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: cat, Question: &q, Answer: &a}); err == nil {
		t.Fatal("updating cat onto dog's pair succeeded")
	} else if dup, ok := errors.AsType[*store.DuplicateError](err); !ok || dup.ID != dog {
		t.Fatalf("updating cat onto dog's pair: %v, want a DuplicateError naming %d", err, dog)
	}
	if it, _ := s.ContextByID(ctx, "alice", cat); it.Question != "cat?" || it.Answer != "Tom" {
		t.Errorf("cat after the refused update: %+v", it)
	}

	// The item's own pair, case changed: allowed.
	it, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: dog, Question: &q})
	if err != nil || it.Question != "Dog?" || it.Answer != "Rex" || it.EventID != "e1" || !it.CreatedAt.Equal(t0) {
		t.Fatalf("case-only update: %+v, %v", it, err)
	}

	newAnswer := "Rex the second"
	if it, err = s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: dog, Answer: &newAnswer}); err != nil || it.Answer != newAnswer {
		t.Fatalf("answer update: %+v, %v", it, err)
	}
	// Dedup compares against the new text: storing it again finds the item.
	if id, inserted, err := s.StoreContext(ctx, store.ContextWrite{UserID: "alice", Question: "dog?", Answer: "rex the SECOND"}); err != nil || inserted || id != dog {
		t.Errorf("storing the updated pair again: id %d inserted %v err %v; want the updated item %d", id, inserted, err, dog)
	}
	// A replay of the turn that said the old pair does not bring it back.
	if ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "dog?", Answer: "Rex", CreatedAt: t0, EventID: "e1"}}); err != nil || ids[0] != 0 {
		t.Errorf("replayed old pair: ids %v, %v; want it skipped", ids, err)
	}
	if n, _ := s.CountContext(ctx, "alice"); n != 2 {
		t.Errorf("alice has %d items, want 2", n)
	}
	// The search columns follow the text.
	for kw, want := range map[string]int{"second": 1, "rex": 1, "tom": 1} {
		c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{kw}})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Matches) != want {
			t.Errorf("search %q: %d items, want %d", kw, len(c.Matches), want)
		}
	}
}

// TestInsertContextBatchKeepsLatestTime writes one batch holding the same
// pair twice, the earlier statement first (as an extraction job of a
// conversation orders its turns): the item's time is the later statement's,
// as when the two come in separate batches, whether the batch inserts the
// item or finds it stored already. (Before, the batch's first statement
// was the only one written, so the item kept the earlier time, and a
// replay, batching the turns otherwise, gave the item another time.)
func TestInsertContextBatchKeepsLatestTime(t *testing.T) {
	ctx, s := setup(t)
	// bob has the pair stored already, from before both statements.
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "bob", Question: "I live in Lyon", Answer: "ok", EventID: "b0", CreatedAt: t0.Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		ids, err := s.InsertContext(ctx, []store.ContextWrite{
			{UserID: user, Question: "I live in Lyon", Answer: "ok", EventID: "e1", CreatedAt: t0},
			{UserID: user, Question: "I live in Lyon", Answer: "ok", EventID: "e2", CreatedAt: t0.Add(2 * time.Hour)},
			{UserID: user, Question: "I live in Lyon", Answer: "ok", EventID: "e3", CreatedAt: t0.Add(time.Hour)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if user == "alice" && (ids[0] == 0 || ids[1] != 0 || ids[2] != 0) {
			t.Errorf("%s: ids %v, want the first statement's insert only", user, ids)
		}
		items, err := s.RecentContext(ctx, user, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 {
			t.Fatalf("%s has %d items, want 1", user, len(items))
		}
		if want := t0.Add(2 * time.Hour); !items[0].CreatedAt.Equal(want) {
			t.Errorf("%s's item is at %s, want %s (the latest statement of the batch)", user, items[0].CreatedAt.UTC(), want)
		}
	}
}
