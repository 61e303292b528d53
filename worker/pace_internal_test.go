package worker

import (
	"context"
	"math"
	"testing"
	"time"
)

type fixedPressure float64

func (p fixedPressure) Pressure() float64 { return float64(p) }

// TestPaceDelay: the pause is the pressure's share of pauseFactor times
// the work's own time, never more than MaxPause, and none for no pacer, no
// pressure, a nonsensical one or no work.
func TestPaceDelay(t *testing.T) {
	maxPause := 200 * time.Millisecond
	took := 10 * time.Millisecond
	for _, tt := range []struct {
		p    Pacer
		took time.Duration
		want time.Duration
	}{
		{nil, took, 0},
		{fixedPressure(0), took, 0},
		{fixedPressure(-1), took, 0},
		{fixedPressure(math.NaN()), took, 0},
		{fixedPressure(1), 0, 0},
		{fixedPressure(0.5), took, 15 * time.Millisecond},
		{fixedPressure(1), took, 30 * time.Millisecond},
		{fixedPressure(7), took, 30 * time.Millisecond},
		{fixedPressure(math.Inf(1)), took, 30 * time.Millisecond},
		{fixedPressure(1), time.Second, maxPause},
	} {
		if got := newPace(tt.p, maxPause).delay(tt.took); got != tt.want {
			t.Errorf("pressure %v after %s: delay %s, want %s", tt.p, tt.took, got, tt.want)
		}
	}
	var nilPace *pace
	if d := nilPace.delay(took); d != 0 {
		t.Errorf("nil pace: delay %s", d)
	}
}

// TestPaceAfterEndsWithItsContext: a pause is cut short by its context.
func TestPaceAfterEndsWithItsContext(t *testing.T) {
	p := newPace(fixedPressure(1), time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { errs <- p.after(ctx, time.Hour) }()
	cancel()
	if err := <-errs; err != context.Canceled {
		t.Fatalf("after returned %v, want context.Canceled", err)
	}
}
