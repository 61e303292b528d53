package worker

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStopEndsWhatWasArmedBeforeStart: what reads the worker's halt
// before its first Start (a wake armed at a model answer, a halting job's
// context) ends with the first Stop. halt was nil until Start made it:
// such a wake ran after Stop, unwaited.
func TestStopEndsWhatWasArmedBeforeStart(t *testing.T) {
	e, w := haltSetup(t)
	before, stoppedBefore, cancel := w.halting(context.Background())
	defer cancel()
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	waitEndedByStop(t, before, "the context taken before Start", stoppedBefore)

	// And a second run's Stop ends what was taken after the first Stop.
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	during, stoppedDuring, cancel2 := w.halting(context.Background())
	defer cancel2()
	if during.Err() != nil {
		t.Fatalf("a context taken in a second run ended before its Stop: %v", context.Cause(during))
	}
	if err := w.Stop(e.ctx); err != nil {
		t.Fatal(err)
	}
	waitEndedByStop(t, during, "the context taken in the second run", stoppedDuring)
}

// TestStopOfAWorkerNeverStartedEndsWhatWasArmed: a worker made and
// stopped without a Start (a test's, a start that failed before River)
// ends what reads its halt, as a stop after a Start does: a test's wake
// armed that way ran until the package's end.
func TestStopOfAWorkerNeverStartedEndsWhatWasArmed(t *testing.T) {
	e, w := haltSetup(t)
	ctx, stopped, cancel := w.halting(context.Background())
	defer cancel()
	for range 2 { // a second Stop is a no-op
		if err := w.Stop(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitEndedByStop(t, ctx, "the context", stopped)
}

// TestStopOfAWorkerNeverStartedWaitsForItsWakes: a Stop of a worker never
// started waits for a wake armed since New that is running, as a Stop
// after a Start does (none logs or writes after Stop); it returned at
// once, the wake still running.
func TestStopOfAWorkerNeverStartedWaitsForItsWakes(t *testing.T) {
	e, w := haltSetup(t)
	// The wake's check of the model server (the dial) holds it until
	// released.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	w.modelWaits.refuses = func(context.Context) bool {
		close(entered)
		<-release
		return true
	}
	w.wakeSoon(&w.modelWaits, 0)
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- w.Stop(e.ctx) }()
	var early bool
	eventstest.Eventually(t, "Stop to end or to wait for the wake", 30*time.Second, func() (bool, string) {
		select {
		case err := <-stopped:
			early = true
			stopped <- err
			return true, ""
		default:
		}
		return stopWaitsForWakes(t.Name()), ""
	})
	if early {
		t.Fatal("Stop of a worker never started returned while a wake armed before it still ran")
	}
	once.Do(func() { close(release) })
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// stopWaitsForWakes reports whether a Stop that test started is blocked
// in its wait for the wakes (its goroutine's stack).
func stopWaitsForWakes(test string) bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "(*WaitGroup).Wait") && strings.Contains(g, "(*Worker).Stop") && strings.Contains(g, test) {
			return true
		}
	}
	return false
}

// haltSetup returns the test's stream and a worker on the offline rules,
// not started.
func haltSetup(t *testing.T) (*raceEnv, *Worker) {
	t.Helper()
	e := raceSetup(t)
	w, err := New(Config{Conn: e.js.Conn(), Store: storetest.New(t), Extractor: &extractor.Rules{}, Logger: slog.New(slog.DiscardHandler), Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	return e, w
}

// waitEndedByStop waits until ctx, taken from the worker's halting, ends,
// and fails the test unless its Stop ended it (stopped, from halting).
func waitEndedByStop(t *testing.T, ctx context.Context, what string, stopped func() bool) {
	t.Helper()
	eventstest.Eventually(t, what+" to end with Stop", 30*time.Second, func() (bool, string) {
		return ctx.Err() != nil, ""
	})
	if !stopped() {
		t.Fatalf("%s ended with %v, want Stop's", what, context.Cause(ctx))
	}
}
