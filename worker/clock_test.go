package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestClockOffset(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name            string
		rtt             time.Duration
		dbNow           time.Time
		want, wantUncer time.Duration
	}{
		{name: "in step", rtt: 2 * time.Millisecond, dbNow: t0.Add(time.Millisecond), want: 0, wantUncer: time.Millisecond},
		{name: "host 90 s ahead", rtt: 2 * time.Millisecond, dbNow: t0.Add(time.Millisecond - 90*time.Second), want: 90 * time.Second, wantUncer: time.Millisecond},
		{name: "host 2 min behind", rtt: 0, dbNow: t0.Add(2 * time.Minute), want: -2 * time.Minute},
		{name: "a slow round trip", rtt: 4 * time.Second, dbNow: t0, want: 2 * time.Second, wantUncer: 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, uncer := clockOffset(t0, t0.Add(c.rtt), c.dbNow)
			if got != c.want || uncer != c.wantUncer {
				t.Fatalf("clockOffset = %s ± %s, want %s ± %s", got, uncer, c.want, c.wantUncer)
			}
		})
	}
}

// TestCheckClockWarnsOnceAWhile: a host clock off Postgres's is warned of
// at once, not again within clockWarnEvery, again after it, and a line
// says when it agrees again; an offset within the round trip's
// uncertainty is no warning.
func TestCheckClockWarnsOnceAWhile(t *testing.T) {
	var buf bytes.Buffer
	l := &liveness{w: &Worker{logger: slog.New(slog.NewTextHandler(&buf, nil))}}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	beat := func(at time.Time, rtt, ahead time.Duration) string {
		buf.Reset()
		l.checkClock(at, at.Add(rtt), at.Add(rtt/2-ahead))
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

// TestCheckStepHoldsTakeovers: a forward jump of Postgres's clock between
// two heartbeats (beyond the time passed here, a second and the readings'
// uncertainty) holds takeovers back for ProcessTimeout from it, with one
// warning; drift within the bound, a slow round trip and a backward step
// hold nothing.
func TestCheckStepHoldsTakeovers(t *testing.T) {
	var buf bytes.Buffer
	l := &liveness{w: &Worker{logger: slog.New(slog.NewTextHandler(&buf, nil)), cfg: Config{ProcessTimeout: 10 * time.Second}}}
	t0 := time.Now()
	db0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	// beat is a heartbeat sent at t0+at, taking rtt, whose reply read
	// Postgres's clock at db0+db (at the round trip's middle).
	beat := func(at, db, rtt time.Duration) bool {
		sent := t0.Add(at)
		return l.checkStep(sent, sent.Add(rtt), db0.Add(db+rtt/2))
	}
	for _, b := range []struct {
		name        string
		at, db, rtt time.Duration
		hold        bool
	}{
		{name: "first reading", at: 0, db: 0, rtt: time.Millisecond},
		{name: "in step", at: 2 * time.Second, db: 2 * time.Second, rtt: time.Millisecond},
		{name: "drift within the bound", at: 4 * time.Second, db: 4*time.Second + 900*time.Millisecond, rtt: time.Millisecond},
		{name: "a slow round trip", at: 6 * time.Second, db: 8 * time.Second, rtt: 4 * time.Second},
		{name: "a step forward of a minute", at: 12 * time.Second, db: 74 * time.Second, rtt: time.Millisecond, hold: true},
		{name: "within ProcessTimeout after it", at: 20 * time.Second, db: 82 * time.Second, rtt: time.Millisecond, hold: true},
		{name: "ProcessTimeout after it", at: 22 * time.Second, db: 84 * time.Second, rtt: time.Millisecond},
		{name: "a step back", at: 24 * time.Second, db: 26 * time.Second, rtt: time.Millisecond},
	} {
		buf.Reset()
		if got := beat(b.at, b.db, b.rtt); got != b.hold {
			t.Fatalf("%s: hold = %v, want %v", b.name, got, b.hold)
		}
		warned := strings.Contains(buf.String(), "jumped forward")
		if want := b.name == "a step forward of a minute"; warned != want {
			t.Fatalf("%s: log %q, want a warning: %v", b.name, buf.String(), want)
		}
	}
}
