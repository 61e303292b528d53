package enricher

import (
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
