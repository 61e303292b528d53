package worker

import (
	"context"
	"time"
)

// Pacer says how hard ingest and extraction should hold back for work that
// matters more than they do (enrich, which a chat frontend waits for before
// every model call): Pressure returns 0 for full speed up to 1 for the
// slowest pace. It is called after every ingest batch and extraction job,
// from several goroutines, and must be quick and safe for concurrent use.
type Pacer interface {
	Pressure() float64
}

// pauseFactor is how long, at full pressure, the pause after an ingest
// batch or an extraction job is, in multiples of the time the batch or job
// took: at most 3, so that each of them runs at least a quarter of the time
// and ingest keeps at least about a quarter of its speed.
const pauseFactor = 3

// pace holds the worker back under a Pacer's pressure, boundedly: after an
// ingest batch or an extraction job that took t, it pauses pressure ×
// pauseFactor × t, at most MaxPause. The pause scales with the work, so
// the slow-down is a share of what the process does (about a quarter of
// its speed kept at full pressure, and at least one batch or job per
// MaxPause plus its own time): held back, never stalled, however long the
// pressure lasts.
type pace struct {
	pacer    Pacer // nil: never pause
	maxPause time.Duration
}

func newPace(p Pacer, maxPause time.Duration) *pace {
	return &pace{pacer: p, maxPause: maxPause}
}

// delay is the pause after work that took took, at the current pressure.
func (p *pace) delay(took time.Duration) time.Duration {
	if p == nil || p.pacer == nil || took <= 0 {
		return 0
	}
	f := p.pacer.Pressure()
	if !(f > 0) { // also NaN
		return 0
	}
	return min(time.Duration(min(f, 1)*pauseFactor*float64(took)), p.maxPause)
}

// after pauses for delay(took). It returns early, with ctx's error, when
// ctx ends, and at once without pressure.
func (p *pace) after(ctx context.Context, took time.Duration) error {
	d := p.delay(took)
	if d <= 0 {
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
