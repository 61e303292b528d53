package worker

import (
	"context"
	"math"
	"testing"
	"time"
)

type fixedPressure float64

func (p fixedPressure) Pressure() float64 { return float64(p) }

// TestPaceAllowed: all units run at once without pressure (or with a
// nonsensical one), one fewer per share of pressure, never fewer than one.
func TestPaceAllowed(t *testing.T) {
	for _, tt := range []struct {
		p     float64
		units int
		want  int
	}{
		{0, 21, 21},
		{-1, 21, 21},
		{math.NaN(), 21, 21},
		{0.5, 21, 11},
		{0.9, 21, 3},
		{0.99, 21, 1},
		{1, 21, 1},
		{7, 21, 1},
		{math.Inf(1), 21, 1},
		{0, 0, 1},
		{1, 1, 1},
	} {
		if got := newPace(fixedPressure(tt.p), time.Second, tt.units).allowed(); got != tt.want {
			t.Errorf("pressure %v, %d units: allowed %d, want %d", tt.p, tt.units, got, tt.want)
		}
	}
}

// TestPaceOneAtATimeUnderFullPressure: at full pressure a second unit has
// no turn until the first leaves; leaving twice frees one turn only.
func TestPaceOneAtATimeUnderFullPressure(t *testing.T) {
	p := newPace(fixedPressure(1), time.Hour, 21)
	leave := p.enter(context.Background())
	if ok, _ := p.tryEnter(); ok {
		t.Fatal("a second unit entered under full pressure while one runs")
	}
	leave()
	leave()
	if ok, _ := p.tryEnter(); !ok {
		t.Fatal("no unit may enter after the running one left")
	}
	if ok, _ := p.tryEnter(); ok {
		t.Fatal("a second leave freed a second turn")
	}
}

// TestPaceWaitEndsWhenATurnFrees: a waiting unit enters when the running
// one leaves, well before its MaxPause.
func TestPaceWaitEndsWhenATurnFrees(t *testing.T) {
	p := newPace(fixedPressure(1), time.Hour, 21)
	leave := p.enter(context.Background())
	entered := make(chan func())
	go func() { entered <- p.enter(context.Background()) }()
	leave()
	(<-entered)()
	if p.running != 0 {
		t.Fatalf("%d units still counted running", p.running)
	}
}

// TestPaceWaitIsBounded: under pressure that never lets up and a unit that
// never leaves, the next unit still runs, after MaxPause or when its
// context ends: held back, never stalled.
func TestPaceWaitIsBounded(t *testing.T) {
	p := newPace(fixedPressure(1), time.Nanosecond, 21)
	_ = p.enter(context.Background())
	_ = p.enter(context.Background()) // returns: MaxPause has passed
	q := newPace(fixedPressure(1), time.Hour, 21)
	_ = q.enter(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = q.enter(ctx); close(done) }()
	cancel()
	<-done
	if q.running != 2 {
		t.Fatalf("running = %d, want 2 (the unit that stopped waiting runs and counts)", q.running)
	}
}

// TestPaceWithoutPacer: no pacer, no limit.
func TestPaceWithoutPacer(t *testing.T) {
	p := newPace(nil, time.Hour, 1)
	for range 5 {
		_ = p.enter(context.Background())
	}
	var nilPace *pace
	nilPace.enter(context.Background())()
}
