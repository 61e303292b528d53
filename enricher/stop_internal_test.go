package enricher

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStopWaitsForTheRequestsTheDrainHandsOver: a request the
// subscription's drain hands over during a stop runs on the delivery
// goroutine, not in a request goroutine. Stop waits for it as for the
// others, and does not cancel it once they are done. Before, Stop halted
// as soon as the request goroutines ended, cancelled the handed-over
// request (its requester answered "memoryd stopped before this request was
// done"), and returned nil. A request handed over once Stop has halted is
// cancelled before its work starts.
func TestStopWaitsForTheRequestsTheDrainHandsOver(t *testing.T) {
	t.Parallel()
	s := startInternal(t)
	outcome := make(chan string, 2)
	run := func(name string, release chan struct{}) func() {
		return func() {
			select {
			case <-release:
				outcome <- name + " done"
			case <-s.halted.Done():
				outcome <- name + " cancelled"
			}
		}
	}
	refused := func() { t.Error("a request was refused") }
	deadline := time.Now().Add(time.Minute)
	relA, relB := make(chan struct{}), make(chan struct{})
	s.dispatch(s.toolLane, "alice", deadline, nil, run("a", relA), refused)

	waiting := make(chan struct{}, 1)
	s.drainWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	stopped := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { stopped <- s.Stop(ctx) }()
	eventstest.Eventually(t, "the stop to begin", 10*time.Second, func() (bool, string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.stopping, ""
	})
	// What the drain does with a request delivered after the stop began.
	go s.dispatch(s.toolLane, "bob", deadline, nil, run("b", relB), refused)
	eventstest.Eventually(t, "the handed-over request to run", 10*time.Second, func() (bool, string) {
		return s.active.Load() == 2, ""
	})

	close(relA)
	if got := <-outcome; got != "a done" {
		t.Fatalf("first outcome %q, want a done", got)
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a request the drain handed over was still running", err)
	case <-waiting:
	}
	close(relB)
	if got := <-outcome; got != "b done" {
		t.Fatalf("the handed-over request: %q, want b done", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}

	// After the halt, a request's work starts with its context cancelled.
	rctx, rcancel := s.requestContext(context.Background(), deadline)
	defer rcancel()
	if rctx.Err() == nil {
		t.Fatal("a request's context made after the halt is not cancelled")
	}
}

// TestStopPastItsDeadlineCountsOnlyUnanswered: a stop whose deadline has
// passed reports the requests it cancelled before they answered, not one
// that has sent its reply and is still finishing. Before, it counted every
// request goroutine, so a stop just after a reply went out (its requester
// already had it) failed saying a request was cancelled (seen in CI as
// TestStopPastItsDeadline's idle case).
func TestStopPastItsDeadlineCountsOnlyUnanswered(t *testing.T) {
	t.Parallel()
	s := startInternal(t)
	replied := make(chan struct{})
	mark := s.newAnswerMark()
	s.dispatch(s.toolLane, "alice", time.Now().Add(time.Minute), mark, func() {
		mark.answered()
		close(replied)
		<-s.halted.Done() // finishing after its reply, until the halt
	}, func() { t.Error("the request was refused") })
	<-replied

	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(expired); err != nil {
		t.Fatalf("stop past its deadline with only an answered request finishing: %v", err)
	}
	if n := s.unanswered.Load(); n != 0 {
		t.Errorf("unanswered = %d after the stop, want 0", n)
	}
}

// startInternal starts a service on its own prefix, over a store of its
// own.
func startInternal(t *testing.T) *Service {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	s, err := New(Config{Conn: eventstest.Conn(t), Store: storetest.New(t), Prefix: "t" + hex.EncodeToString(b[:]),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAnalyzeKeepsShortNames: a message whose only keyword is a short
// word written as a name (shortName) is searched for it, not taken for
// stop words alone.
func TestAnalyzeKeepsShortNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		msg  string
		want []string
	}{
		{"what about Go?", []string{"go"}},
		{"and the UK?", []string{"uk"}},
		{"what about the other one?", []string{}},
	} {
		p := enrichParams{message: tt.msg, at: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}.analyze()
		if !slices.Equal(p.keywords, tt.want) {
			t.Errorf("analyze(%q).keywords = %q, want %q", tt.msg, p.keywords, tt.want)
		}
	}
}

// TestAfterMargin: a closed range reaches past its end by its length on
// its zone's clock (a day across a change of daylight saving time is a
// day: it reached 01:00 of the day after next, or 23:00 of the next); an
// open range gets none.
func TestAfterMargin(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	d := func(m time.Month, day, h int) time.Time { return time.Date(2026, m, day, h, 0, 0, 0, ny) }
	for _, tt := range []struct {
		name         string
		since, until time.Time
		want         time.Time
	}{
		{"a day", d(time.May, 1, 0), d(time.May, 2, 0), d(time.May, 3, 0)},
		{"the day DST ends (25 h)", d(time.November, 1, 0), d(time.November, 2, 0), d(time.November, 3, 0)},
		{"the day DST begins (23 h)", d(time.March, 8, 0), d(time.March, 9, 0), d(time.March, 10, 0)},
		{"a month across DST", d(time.November, 1, 0), d(time.December, 1, 0), d(time.December, 31, 0)},
		{"a morning", d(time.May, 1, 0), d(time.May, 1, 12), d(time.May, 2, 0)},
		{"open since", time.Time{}, d(time.May, 2, 0), d(time.May, 2, 0)},
		{"open until", d(time.May, 1, 0), time.Time{}, time.Time{}},
	} {
		if got := AfterMargin(TimeExpr{Since: tt.since, Until: tt.until}); !got.Equal(tt.want) {
			t.Errorf("%s: AfterMargin = %s, want %s", tt.name, got, tt.want)
		}
	}
}
