package worker

import (
	"context"
	"math"
	"testing"
	"time"
)

type fixedPressure float64

func (p fixedPressure) Pressure() float64 { return float64(p) }

// TestPaceDelay: the pause is the pressure's share of MaxPause, never more
// than MaxPause, and none for no pacer, no pressure or a nonsensical one.
func TestPaceDelay(t *testing.T) {
	maxPause := 200 * time.Millisecond
	for _, tt := range []struct {
		p    Pacer
		want time.Duration
	}{
		{nil, 0},
		{fixedPressure(0), 0},
		{fixedPressure(-1), 0},
		{fixedPressure(math.NaN()), 0},
		{fixedPressure(0.5), 100 * time.Millisecond},
		{fixedPressure(1), maxPause},
		{fixedPressure(7), maxPause},
		{fixedPressure(math.Inf(1)), maxPause},
	} {
		if got := newPace(tt.p, maxPause).delay(); got != tt.want {
			t.Errorf("pressure %v: delay %s, want %s", tt.p, got, tt.want)
		}
	}
	var nilPace *pace
	if d := nilPace.delay(); d != 0 {
		t.Errorf("nil pace: delay %s", d)
	}
}

// TestPaceWaitEndsWithItsContext: a pause is cut short by its context,
// and a waiter for the gate gives up with it too.
func TestPaceWaitEndsWithItsContext(t *testing.T) {
	p := newPace(fixedPressure(1), time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- p.wait(ctx, p.jobs) }()
	}
	cancel()
	for range 2 {
		if err := <-errs; err != context.Canceled {
			t.Fatalf("wait returned %v, want context.Canceled", err)
		}
	}
	if len(p.jobs) != 0 {
		t.Fatal("the gate is still held after the waits ended")
	}
}
