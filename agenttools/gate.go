package agenttools

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/memoryd/memoryd/events"
)

// userGate lets at most n calls of one user reach memoryd at once; more
// wait their turn here. memoryd works on at most its per-user bound
// (enricher.Config.MaxUserInFlight, 4) of a user's requests at once and
// lets 16 more wait, answering the rest 500 "overloaded" at once (as did
// releases before it for any past the bound): an agent issuing many tool
// calls in parallel would otherwise see some of them fail on an idle
// server.
type userGate struct {
	n int

	mu    sync.Mutex
	users map[string]*userSlots
}

type userSlots struct {
	slots chan struct{}
	refs  int // calls holding or waiting for a slot
}

func newUserGate(n int) *userGate {
	return &userGate{n: n, users: map[string]*userSlots{}}
}

// enter waits for one of user's slots until ctx is done; on success the
// caller must call the returned release once.
func (g *userGate) enter(ctx context.Context, user string) (release func(), err error) {
	g.mu.Lock()
	u := g.users[user]
	if u == nil {
		u = &userSlots{slots: make(chan struct{}, g.n)}
		g.users[user] = u
	}
	u.refs++
	g.mu.Unlock()
	select {
	case u.slots <- struct{}{}:
		return func() {
			<-u.slots
			g.done(user, u)
		}, nil
	case <-ctx.Done():
		g.done(user, u)
		return nil, ctx.Err()
	}
}

// done drops a reference to u, and u once nothing holds it, so that the
// map holds only users with calls.
func (g *userGate) done(user string, u *userSlots) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if u.refs--; u.refs == 0 {
		delete(g.users, user)
	}
}

// retryOverloaded runs call, and again while memoryd answers it
// "overloaded" (which it does without doing anything, so that a store or a
// delete is not done twice), at most overloadedRetries times, with a
// growing pause, within ctx. The gate keeps this server's own calls under
// memoryd's per-user bound, but the bound is also taken by the user's
// other clients, and memoryd frees a request's place just after its reply.
func retryOverloaded[Out any](ctx context.Context, call func() (Out, error)) (Out, error) {
	pause := 10 * time.Millisecond
	for try := 0; ; try++ {
		out, err := call()
		var svc *events.ServiceError
		if try == overloadedRetries || !errors.As(err, &svc) || !svc.Overloaded() {
			return out, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return out, err
		case <-t.C:
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

// overloadedRetries bounds retryOverloaded: with its pauses, about 0.9 s.
const overloadedRetries = 8
