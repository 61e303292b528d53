package worker

import (
	"context"
	"math"
	"sync"
	"time"
)

// Pacer says how hard ingest and extraction should hold back for work that
// matters more than they do (enrich, which a chat frontend waits for before
// every model call): Pressure returns 0 for full speed up to 1 for the
// slowest pace. It is called before every ingest batch and extraction job,
// from several goroutines, and must be quick and safe for concurrent use.
type Pacer interface {
	Pressure() float64
}

// pace holds the worker back under a Pacer's pressure by running fewer
// ingest batches and extraction jobs at once: all of them (units) without
// pressure, down to one at full pressure. A batch or job waits for its
// turn at most maxPause, then runs anyway: held back, never stalled,
// however long the pressure lasts.
//
// Why fewer at once rather than pauses: on a small machine enrich loses
// to ingest by waiting for a CPU behind every busy Postgres backend of the
// extraction jobs; one job at a time leaves it a core, and that job still
// runs at full speed. Pauses in proportion to the work (the first design)
// kept twenty jobs running, a quarter of the time each: enrich still
// queued behind several of them, and ingest kept a quarter of its speed
// (docs/performance.md, "Enrich isolated from ingest").
type pace struct {
	pacer    Pacer // nil: never held back
	maxPause time.Duration
	units    int // batches and jobs that may run at once without pressure

	mu      sync.Mutex
	running int
	freed   chan struct{} // closed when a unit ends, then replaced
}

func newPace(p Pacer, maxPause time.Duration, units int) *pace {
	return &pace{pacer: p, maxPause: maxPause, units: max(units, 1), freed: make(chan struct{})}
}

// allowed is how many units may run at once at the current pressure:
// units at none, falling linearly to one at full pressure.
func (p *pace) allowed() int {
	f := p.pacer.Pressure()
	if !(f > 0) { // also NaN
		return p.units
	}
	return max(1, int(math.Ceil((1-min(f, 1))*float64(p.units))))
}

// tryEnter starts a unit if the pressure allows one more.
func (p *pace) tryEnter() (ok bool, freed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running < p.allowed() {
		p.running++
		return true, nil
	}
	return false, p.freed
}

// recheck is how often a waiting unit reads the pressure again: it may
// fall without any unit ending.
const recheck = 20 * time.Millisecond

// enter waits for the turn of a batch or job and returns the function that
// ends it. It waits at most maxPause, and not once ctx ends: the unit then
// runs anyway (counted, so the others still wait for it).
func (p *pace) enter(ctx context.Context) (leave func()) {
	if p == nil || p.pacer == nil {
		return func() {}
	}
	deadline := time.Now().Add(p.maxPause)
	for {
		ok, freed := p.tryEnter()
		if ok {
			break
		}
		wait := min(time.Until(deadline), recheck)
		if wait <= 0 || ctx.Err() != nil {
			p.mu.Lock()
			p.running++
			p.mu.Unlock()
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-freed:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	var once sync.Once
	return func() { once.Do(p.leave) }
}

func (p *pace) leave() {
	p.mu.Lock()
	p.running--
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}
