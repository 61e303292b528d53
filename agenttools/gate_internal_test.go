package agenttools

import (
	"context"
	"errors"
	"testing"

	"github.com/memoryd/memoryd/events"
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

// retryOverloaded sends a call again only while memoryd answers it
// "overloaded", and a bounded number of times.
func TestRetryOverloaded(t *testing.T) {
	t.Parallel()
	overloaded := &events.ServiceError{Code: 500, Description: events.OverloadedDescription}
	for _, tt := range []struct {
		name  string
		errs  []error // the answers in turn; nil: success
		calls int
		fails bool
	}{
		{"succeeds at once", []error{nil}, 1, false},
		{"overloaded twice", []error{overloaded, overloaded, nil}, 3, false},
		{"another 500 is not retried", []error{&events.ServiceError{Code: 500, Description: "internal error"}}, 1, true},
		{"a 400 is not retried", []error{&events.ServiceError{Code: 400, Description: "bad"}}, 1, true},
		{"overloaded for good", nil, overloadedRetries + 1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			_, err := retryOverloaded(context.Background(), func() (int, error) {
				calls++
				if calls <= len(tt.errs) {
					return 0, tt.errs[calls-1]
				}
				return 0, overloaded
			})
			if calls != tt.calls || (err != nil) != tt.fails {
				t.Fatalf("%d calls, err %v; want %d calls, failing %v", calls, err, tt.calls, tt.fails)
			}
		})
	}
}
