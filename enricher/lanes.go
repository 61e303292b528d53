package enricher

import (
	"sync"
	"sync/atomic"
	"time"
)

// lane bounds one kind of request: at most cap(slots) are worked on at once,
// at most maxWaiting wait for a slot, and with perUser > 0 at most perUser of
// one user are worked on or waiting.
type lane struct {
	slots      chan struct{}
	maxWaiting int64
	waiting    atomic.Int64
	perUser    int

	mu    sync.Mutex
	users map[string]int // requests in the lane by user token
}

func newLane(limit, perUser int) *lane {
	return &lane{slots: make(chan struct{}, limit), maxWaiting: 4 * int64(limit), perUser: perUser, users: map[string]int{}}
}

// enter counts a request of user; false when the user is at the bound.
func (l *lane) enter(user string) bool {
	if l.perUser == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[user] >= l.perUser {
		return false
	}
	l.users[user]++
	return true
}

func (l *lane) leave(user string) {
	if l.perUser == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[user]--; l.users[user] <= 0 {
		delete(l.users, user)
	}
}

// queue counts a request that waits for a slot; false when the wait is full.
func (l *lane) queue() bool {
	if l.waiting.Add(1) > l.maxWaiting {
		l.waiting.Add(-1)
		return false
	}
	return true
}

// acquire waits for a slot until deadline, for a request queue counted.
func (l *lane) acquire(deadline time.Time) bool {
	defer l.waiting.Add(-1)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// dispatch runs fn on a request goroutine once a slot of lane l is free,
// and calls overloaded instead when user is at the lane's per-user bound,
// the lane's wait is full, or no slot frees up before deadline. It never
// blocks the delivery goroutine, so a request is answered (in its budget)
// however many wait behind a busy lane. While the service stops, the work
// runs inline, so requests drained from the subscription are still answered.
func (s *Service) dispatch(l *lane, user string, deadline time.Time, fn, overloaded func()) {
	if !l.enter(user) {
		overloaded()
		return
	}
	slot := false
	select {
	case l.slots <- struct{}{}:
		slot = true
	default:
		if !l.queue() {
			l.leave(user)
			overloaded()
			return
		}
	}
	work := func() {
		defer l.leave(user)
		if !slot && !l.acquire(deadline) {
			overloaded()
			return
		}
		defer func() { <-l.slots }()
		fn()
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		work()
		return
	}
	s.work.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.work.Done()
		work()
	}()
}
