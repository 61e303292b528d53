package worker

import (
	"context"
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

// pace holds back the worker under a Pacer's pressure, boundedly: before an
// ingest batch or an extraction job it waits pressure × MaxPause, and the
// jobs wait one after another (a gate), so that at full pressure extraction
// starts at most one job per MaxPause whatever Workers is. However long the
// pressure lasts, ingest records a batch and extraction starts a job at
// least once per MaxPause: held back, never stalled.
type pace struct {
	pacer    Pacer // nil: never wait
	maxPause time.Duration
	ingest   chan struct{} // gate of the ingest loop's batches
	jobs     chan struct{} // gate of the extraction jobs
}

func newPace(p Pacer, maxPause time.Duration) *pace {
	return &pace{pacer: p, maxPause: maxPause, ingest: make(chan struct{}, 1), jobs: make(chan struct{}, 1)}
}

// delay is the pause the current pressure asks for.
func (p *pace) delay() time.Duration {
	if p == nil || p.pacer == nil {
		return 0
	}
	f := p.pacer.Pressure()
	if !(f > 0) { // also NaN
		return 0
	}
	return time.Duration(min(f, 1) * float64(p.maxPause))
}

// wait passes gate after the pause the pressure asks for, holding the gate
// during the pause so that waiters pass one at a time. It returns early,
// with ctx's error, when ctx ends, and at once without pressure.
func (p *pace) wait(ctx context.Context, gate chan struct{}) error {
	if p.delay() == 0 {
		return nil
	}
	select {
	case gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-gate }()
	d := p.delay() // the pressure may have changed while waiting for the gate
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
