package enricher

import (
	"sync"
	"sync/atomic"
	"time"
)

// lane bounds one kind of request: at most cap(slots) are worked on at once,
// at most maxWaiting wait for a slot, and with perUser > 0 at most perUser of
// one user are worked on at once and at most userWaiting more of that user
// wait for their turn, at most maxWaiting of all users. The two waits are
// counted apart, so that users flooding the lane fill only the turn wait,
// and a request of another user, whose turn is free, still finds room to
// wait for a slot.
type lane struct {
	slots       chan struct{}
	maxWaiting  int64
	waiting     atomic.Int64 // requests holding their turn, waiting for a slot
	turnWaiting atomic.Int64 // requests waiting for their user's turn
	perUser     int

	mu    sync.Mutex
	users map[string]*userGate // requests in the lane by user token
}

// userGate is one user's share of a lane: turn holds a value per request of
// the user being worked on, n counts the user's requests in the lane
// (worked on or waiting).
type userGate struct {
	turn chan struct{}
	n    int
}

// userWaiting is how many requests of one user, beyond those worked on,
// wait for their turn: a frontend that loads a user's page with a burst of
// requests is served in turn, while one user flooding the lane is refused
// past it.
func userWaiting(perUser int) int { return 4 * perUser }

func newLane(limit, perUser int) *lane {
	return &lane{slots: make(chan struct{}, limit), maxWaiting: 4 * int64(limit), perUser: perUser, users: map[string]*userGate{}}
}

// enter counts a request of user and returns the user's gate (nil without a
// per-user bound); ok is false when the user already has perUser requests
// worked on and userWaiting waiting.
func (l *lane) enter(user string) (g *userGate, ok bool) {
	if l.perUser == 0 {
		return nil, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g = l.users[user]
	if g == nil {
		g = &userGate{turn: make(chan struct{}, l.perUser)}
		l.users[user] = g
	}
	if g.n >= l.perUser+userWaiting(l.perUser) {
		return nil, false
	}
	g.n++
	return g, true
}

func (l *lane) leave(user string, g *userGate) {
	if g == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.n--; g.n <= 0 {
		delete(l.users, user)
	}
}

// queue counts a request in wait w (l.waiting or l.turnWaiting); false
// when it is full.
func (l *lane) queue(w *atomic.Int64) bool {
	if w.Add(1) > l.maxWaiting {
		w.Add(-1)
		return false
	}
	return true
}

// acquire waits until deadline for the user's turn (g not nil, turn not
// taken yet: the request is counted in the turn wait) and then for a slot
// (counted in the slot wait once it has its turn: queued tells whether it
// is already); it reports whether it has the turn, and whether the slot
// too. A request waits for its user's turn first, so that it never holds a
// slot other users' requests could use while it waits.
func (l *lane) acquire(g *userGate, turn, queued bool, deadline time.Time) (gotTurn, ok bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	if g != nil && !turn {
		select {
		case g.turn <- struct{}{}:
			l.turnWaiting.Add(-1)
		case <-t.C:
			l.turnWaiting.Add(-1)
			return false, false
		}
		select {
		case l.slots <- struct{}{}:
			return true, true
		default:
		}
		if !l.queue(&l.waiting) {
			return true, false
		}
	} else if !queued && !l.queue(&l.waiting) {
		return true, false
	}
	defer l.waiting.Add(-1)
	select {
	case l.slots <- struct{}{}:
		return true, true
	case <-t.C:
		return true, false
	}
}

// dispatch runs fn on a request goroutine once it is the user's turn and a
// slot of lane l is free, and calls overloaded instead when the user has
// the lane's per-user bound worked on and waiting, the lane's wait is full,
// or no turn or slot frees up before deadline. It never blocks the delivery
// goroutine, so a request is answered (in its budget) however many wait
// behind a busy lane. While the service stops, the work runs inline, so
// requests drained from the subscription are still answered.
//
// m, when not nil, is marked answered by fn as it starts its reply; it is
// marked when work ends otherwise.
func (s *Service) dispatch(l *lane, user string, deadline time.Time, m *answerMark, fn, overloaded func()) {
	if m == nil {
		m = s.newAnswerMark()
	}
	g, ok := l.enter(user)
	if !ok {
		overloaded()
		return
	}
	turn, slot := g == nil, false
	if !turn {
		select {
		case g.turn <- struct{}{}:
			turn = true
		default:
		}
	}
	if turn {
		select {
		case l.slots <- struct{}{}:
			slot = true
		default:
		}
	}
	// Count the request in the wait it starts in: for its turn, or (with
	// its turn) for a slot.
	wait := &l.waiting
	if !turn {
		wait = &l.turnWaiting
	}
	if !slot && !l.queue(wait) {
		if turn && g != nil {
			<-g.turn
		}
		l.leave(user, g)
		overloaded()
		return
	}
	work := func() {
		defer l.leave(user, g)
		defer m.answered()
		if !slot {
			gotTurn, ok := l.acquire(g, turn, turn, deadline)
			turn = turn || gotTurn
			if !ok {
				if turn && g != nil {
					<-g.turn
				}
				m.answered()
				overloaded()
				return
			}
		}
		defer func() {
			<-l.slots
			if g != nil {
				<-g.turn
			}
		}()
		fn()
	}
	s.mu.Lock()
	if s.stopping {
		// Handed over by the subscription's drain: run here, on the
		// delivery goroutine, counted in active, which Stop waits for.
		s.active.Add(1)
		m.count()
		s.mu.Unlock()
		defer s.endRequest()
		work()
		return
	}
	s.work.Add(1)
	s.active.Add(1)
	m.count()
	s.mu.Unlock()
	go func() {
		defer s.work.Done()
		defer s.endRequest()
		work()
	}()
}

// answerMark tells when a dispatched request starts its reply. Stop reports
// the requests it cancelled before they answered: one that has replied and
// is only finishing (its span, its lane slot) lost nothing, and its
// requester already has the answer.
type answerMark struct {
	unanswered *atomic.Int64 // the service's count
	state      atomic.Int32  // 0 not counted yet, 1 counted and unanswered, 2 answered
}

func (s *Service) newAnswerMark() *answerMark { return &answerMark{unanswered: &s.unanswered} }

// count counts the request unanswered; dispatch calls it where it counts
// the request in active, under the service's mu.
func (m *answerMark) count() {
	m.state.Store(1)
	m.unanswered.Add(1)
}

// answered uncounts the request, once; it does nothing for a request never
// counted (one refused as overloaded before it ran).
func (m *answerMark) answered() {
	if m.state.CompareAndSwap(1, 2) {
		m.unanswered.Add(-1)
	}
}
