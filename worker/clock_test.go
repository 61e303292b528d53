package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestCheckClockWarnsOnceAWhile: a host clock off Postgres's is warned of
// at once, not again within clockWarnEvery, again after it, and a line
// says when it agrees again; an offset within the round trip's
// uncertainty is no warning.
func TestCheckClockWarnsOnceAWhile(t *testing.T) {
	var buf bytes.Buffer
	l := &liveness{w: &Worker{logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	// beat is a heartbeat at at whose reading (a round trip of rtt) put
	// this host ahead of Postgres by ahead.
	beat := func(at time.Time, rtt, ahead time.Duration) string {
		buf.Reset()
		l.checkClock(at, ahead, rtt/2)
		return buf.String()
	}
	if out := beat(t0, time.Millisecond, 0); out != "" {
		t.Fatalf("in step: %q", out)
	}
	if out := beat(t0, 8*time.Second, 3*time.Second); out != "" {
		t.Fatalf("3 s off within a round trip of 8 s: %q", out)
	}
	out := beat(t0, time.Millisecond, 90*time.Second)
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "offset=1m30s") {
		t.Fatalf("90 s ahead: %q, want a warning with the offset", out)
	}
	if out := beat(t0.Add(clockWarnEvery/2), time.Millisecond, 90*time.Second); out != "" {
		t.Fatalf("still 90 s ahead within %s: %q, want nothing", clockWarnEvery, out)
	}
	if out := beat(t0.Add(clockWarnEvery), time.Millisecond, -3*time.Second); !strings.Contains(out, "offset=-3s") {
		t.Fatalf("3 s behind after %s: %q, want a warning again", clockWarnEvery, out)
	}
	if out := beat(t0.Add(clockWarnEvery+time.Second), time.Millisecond, 0); !strings.Contains(out, "level=INFO") || !strings.Contains(out, "agrees") {
		t.Fatalf("back in step: %q, want a line saying so", out)
	}
	if out := beat(t0.Add(clockWarnEvery+2*time.Second), time.Millisecond, 0); out != "" {
		t.Fatalf("in step again: %q", out)
	}
}

// TestHoldTakeoversAfterAJump: once a reading of Postgres's clock saw it
// jump forward (store.Clock.JumpedWithin), takeovers are held back for
// ProcessTimeout from the reading that saw it, with one warning a jump.
func TestHoldTakeoversAfterAJump(t *testing.T) {
	var buf bytes.Buffer
	s := store.New(nil) // its Clock only
	l := &liveness{w: &Worker{logger: slog.New(slog.NewTextHandler(&buf, nil)), cfg: Config{ProcessTimeout: 10 * time.Second, Store: s}}}
	read := func(sent time.Time, ahead time.Duration) {
		s.Clock().Observe(sent, sent.Add(time.Millisecond), sent.Round(0).Add(time.Millisecond/2+ahead))
	}
	now := time.Now()
	read(now.Add(-14*time.Second), 0)
	read(now.Add(-12*time.Second), time.Minute) // a jump 12 s ago: past the hold
	read(now.Add(-10*time.Second), time.Minute)
	if l.holdTakeovers() || buf.Len() > 0 {
		t.Fatalf("a jump 12 s ago held takeovers: %q", buf.String())
	}
	read(now.Add(-2*time.Second), 2*time.Minute) // a jump of a minute 2 s ago
	if !l.holdTakeovers() || !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "jump=1m0s") {
		t.Fatalf("a jump 2 s ago: no hold, or log %q", buf.String())
	}
	buf.Reset()
	read(now, 2*time.Minute)
	if !l.holdTakeovers() || buf.Len() > 0 {
		t.Fatalf("still within the hold: want a hold and no second warning, log %q", buf.String())
	}
}
