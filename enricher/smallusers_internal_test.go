package enricher

import (
	"context"
	"fmt"
	"testing"
)

func TestSmallUsers(t *testing.T) {
	s := newSmallUsers()
	pruned := func(user string) bool { return s.prune(user).Share > 0 }
	if !pruned("a") {
		t.Error("a user not seen yet is read plainly, want pruned")
	}
	for _, c := range []struct {
		items  int
		pruned bool
	}{{0, false}, {pruneMinItems - 1, false}, {pruneMinItems, true}, {10, false}, {pruneMinItems * 3, true}} {
		s.record("a", c.items)
		if got := pruned("a"); got != c.pruned {
			t.Errorf("after a read of %d items: pruned %v, want %v", c.items, got, c.pruned)
		}
	}
	// Past the bound, the set starts again: a user remembered is
	// forgotten, never another's read made plain.
	s.record("a", 1)
	for i := range maxSmallUsers {
		s.record(fmt.Sprint("u", i), 1)
	}
	if len(s.set) > maxSmallUsers {
		t.Errorf("%d users held, more than %d", len(s.set), maxSmallUsers)
	}
	if !pruned("a") {
		t.Error("the first user is still held after the set filled")
	}
}

// TestSmallUsersNotRecordedWithoutARead: a search with no usable keyword
// ("?") reads nothing (store: no round trip), so its zero items are no
// count of the user's memory; recorded, they made a heavy user's next
// reads the plain statement.
func TestSmallUsersNotRecordedWithoutARead(t *testing.T) {
	t.Parallel()
	s := startInternal(t)
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	search := func(query string) {
		t.Helper()
		c, err := s.reads.search("alice", []byte(`{"user_id":"alice","query":"`+query+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	search("?")
	if s.small.prune("alice").Share == 0 {
		t.Error(`after a search of "?", alice is taken for a small user`)
	}
}
