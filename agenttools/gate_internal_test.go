package agenttools

import (
	"context"
	"errors"
	"testing"
)

// A user's calls past the gate's bound wait for a release, or give up with
// their context; other users are not held; a user with no call left is
// forgotten.
func TestUserGate(t *testing.T) {
	t.Parallel()
	g := newUserGate(2)
	ctx := context.Background()
	r1, err1 := g.enter(ctx, "alice")
	r2, err2 := g.enter(ctx, "alice")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if r, err := g.enter(ctx, "bob"); err != nil {
		t.Fatalf("bob held by alice's calls: %v", err)
	} else {
		r()
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.enter(cancelled, "alice"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a third call with its context done: %v", err)
	}
	entered := make(chan func())
	go func() {
		r, err := g.enter(ctx, "alice")
		if err != nil {
			t.Error(err)
		}
		entered <- r
	}()
	r1()
	r3 := <-entered // only once a slot was released
	r2()
	r3()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.users) != 0 {
		t.Fatalf("users left in the gate: %v", g.users)
	}
}
