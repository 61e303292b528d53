package extractor

import (
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/internal/modelerr"
)

// TestAssumeDownCountsTheNextServerErrorAsTheOutage: after assumeDown the
// first server error of any request is the server being down, from that
// failure; an answer ends it, and the next errors are counted afresh
// (three different requests); past serverErrorsWindow it no longer holds;
// a 403 is never taken for it (a review).
func TestAssumeDownCountsTheNextServerErrorAsTheOutage(t *testing.T) {
	msg := func(s string) []openai.ChatCompletionMessage {
		return []openai.ChatCompletionMessage{{Role: "user", Content: s}}
	}
	t0 := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	var r serverErrorRow
	if r.failed(msg("a"), t0, t0, false, false, false) {
		t.Fatal("one server error of a fresh row counted as an outage")
	}
	r.answer(t0, true)
	r.assumeDown(t0)
	if !r.failed(msg("a"), t0, t0.Add(time.Second), false, false, false) {
		t.Fatal("after assumeDown, a server error was not counted as the outage")
	}
	if down := r.answer(t0.Add(2*time.Second), true); down != time.Second {
		t.Errorf("the answer ended an outage of %v, want 1s (from the failure, not from assumeDown)", down)
	}
	// An answer before any failure: no outage to log.
	r.assumeDown(t0)
	if down := r.answer(t0.Add(time.Minute), true); down != 0 {
		t.Errorf("an answer after assumeDown alone ended an outage of %v, want none", down)
	}
	// A refusal (403) of one request is that request's, assumed or not.
	r.assumeDown(t0)
	if r.failed(msg("c"), t0, t0.Add(time.Second), false, false, true) {
		t.Error("after assumeDown, one 403 counted as an outage")
	}
	r.answer(t0.Add(2*time.Second), true)
	if r.failed(msg("a"), t0, t0.Add(3*time.Second), false, false, false) {
		t.Fatal("after an answer, one server error counted as an outage")
	}
	r.assumeDown(t0.Add(4 * time.Second))
	if r.failed(msg("b"), t0, t0.Add(4*time.Second+serverErrorsWindow+time.Second), false, false, false) {
		t.Fatal("a server error past the row's window after assumeDown counted as an outage")
	}
}

// TestAdmitProbesADownServer: while the server counts as down, admit lets
// one request through per gap (a quarter of the outage so far, at most
// MaxProbeGap) and holds the others back with the error that found it
// down, marked as that one was; an answer ends it. Before, every request
// was sent (a rotation walk: 4,660 refused for a revoked key in 100 s).
func TestAdmitProbesADownServer(t *testing.T) {
	msg := []openai.ChatCompletionMessage{{Role: "user", Content: "a"}}
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var r serverErrorRow
	if probe, e := r.admit(t0, defaultMaxProbeGap); e != nil || probe {
		t.Fatalf("a server not down: held back with %v (probe %v)", e, probe)
	}
	r.failed(msg, t0, t0, false, true, false)
	r.remember(&Error{Kind: KindTransient, Reason: "status 401: bad key", Unreachable: true, Misconfigured: true})
	for _, c := range []struct {
		at      time.Duration // since the failure
		sent    bool
		probeIn time.Duration // told when held back: until the next probe may go
	}{
		{500 * time.Millisecond, true, 0}, // the outage's first second: everything is sent
		{900 * time.Millisecond, true, 0},
		{4 * time.Second, true, 0},                               // gap 1 s, 3.1 s since the last sent
		{4500 * time.Millisecond, false, 625 * time.Millisecond}, // gap 1.125 s, 0.5 s since
		{5500 * time.Millisecond, true, 0},                       // gap 1.375 s, 1.5 s since
		{40 * time.Second, true, 0},                              // gap 5 s (capped), 35 s since
		{44 * time.Second, false, time.Second},                   // gap 5 s, 4 s since
		{45 * time.Second, true, 0},
	} {
		probe, e := r.admit(t0.Add(c.at), defaultMaxProbeGap)
		// In the outage's first second requests are sent, not as probes.
		if (e == nil) != c.sent || probe != (c.sent && c.at >= modelerr.MinHoldBack) {
			t.Fatalf("at +%v: admitted %v (probe %v), want %v", c.at, e == nil, probe, c.sent)
		}
		if probe {
			// While it is in flight, no other is let through, past the
			// gap too.
			if _, e := r.admit(t0.Add(c.at+time.Minute), defaultMaxProbeGap); e == nil {
				t.Fatalf("at +%v: a second probe let through while one was in flight", c.at)
			} else if e.ProbeIn != defaultMaxProbeGap {
				t.Fatalf("at +%v: held back beside a probe in flight told to come back in %v, want the whole gap (%v)", c.at, e.ProbeIn, defaultMaxProbeGap)
			}
			r.probeDone()
		}
		if e != nil && (!IsMisconfigured(e) || !strings.Contains(e.Error(), "status 401: bad key") || !strings.Contains(e.Error(), "not sent")) {
			t.Fatalf("at +%v: held back with %q (misconfigured %v), want the refusal's error, marked as it was, saying it was not sent", c.at, e, IsMisconfigured(e))
		}
		var err error
		if e != nil {
			err = e
		}
		if in, held := HeldBackFor(err); held != !c.sent || in != c.probeIn {
			t.Fatalf("at +%v: HeldBackFor = %v, %v; want %v, %v", c.at, in, held, c.probeIn, !c.sent)
		}
	}
	r.answer(t0.Add(46*time.Second), true)
	if _, e := r.admit(t0.Add(46*time.Second+time.Millisecond), defaultMaxProbeGap); e != nil {
		t.Fatalf("after an answer: held back with %v", e)
	}
	// Of a failure that is not the configuration's, the requests held
	// back (other users' jobs) are told its status, not the server's
	// message, which may quote the probe's input.
	r.failed(msg, t0.Add(50*time.Second), t0.Add(50*time.Second), false, true, false)
	r.remember(&Error{Kind: KindTransient, Reason: "status 503: cannot load the template for 'my secret diary'", Unreachable: true})
	r.admit(t0.Add(52*time.Second), defaultMaxProbeGap) // a probe
	_, e := r.admit(t0.Add(52*time.Second+100*time.Millisecond), defaultMaxProbeGap)
	if e == nil || !IsUnreachable(e) || IsMisconfigured(e) || strings.Contains(e.Error(), "diary") || !strings.Contains(e.Error(), "status 503") {
		t.Fatalf("held back with %v, want unreachable, the status and not the server's message", e)
	}
}

// TestAdmitHoldsBackOnlyWithTheOutagesError: a request is held back only
// with the error of the outage it meets. Between a failure taking the
// server for down (failed) and its error being kept (remember), another
// request was held back with no error kept (kind 0, not unreachable: the
// worker spent an attempt on it) or with a previous outage's (a refusal
// of the key long fixed, misconfigured: /readyz's model check failed).
func TestAdmitHoldsBackOnlyWithTheOutagesError(t *testing.T) {
	msg := []openai.ChatCompletionMessage{{Role: "user", Content: "a"}}
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	var r serverErrorRow
	r.failed(msg, t0, t0, false, true, false) // remember not yet called
	if _, e := r.admit(t0.Add(4*time.Second), defaultMaxProbeGap); e != nil {
		t.Fatalf("the first request after the gap: held back with %v", e)
	}
	if _, e := r.admit(t0.Add(4500*time.Millisecond), defaultMaxProbeGap); e != nil && !IsUnreachable(e) {
		t.Fatalf("held back before the outage's error was kept, with %q (kind %v, unreachable %v)", e, KindOf(e), IsUnreachable(e))
	}
	// An outage of a refused key, then an answer; then another outage.
	r.remember(&Error{Kind: KindTransient, Reason: "status 401: bad key", Unreachable: true, Misconfigured: true})
	r.answer(t0.Add(time.Minute), true)
	t1 := t0.Add(2 * time.Minute)
	r.failed(msg, t1, t1, false, true, false)
	r.admit(t1.Add(4*time.Second), defaultMaxProbeGap) // a probe
	if _, e := r.admit(t1.Add(4500*time.Millisecond), defaultMaxProbeGap); e != nil && (IsMisconfigured(e) || strings.Contains(e.Error(), "bad key")) {
		t.Fatalf("held back in a new outage with the previous one's error: %q", e)
	}
}

// TestAdmitHoldsBackAtOnceInAnOutageAssumed: in an outage other
// processes saw (assumeDown: a serve restarted while jobs wait for the
// server), requests are held back from the first failure on, not after a
// second of sending them all (a restart in a walk with the key refused
// sent 11 in it); without one, the outage's first second still sends
// them (a blip holds nothing back).
func TestAdmitHoldsBackAtOnceInAnOutageAssumed(t *testing.T) {
	msg := []openai.ChatCompletionMessage{{Role: "user", Content: "a"}}
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		assumed bool
		failure func(r *serverErrorRow, at time.Time) // the first failure, at
	}{
		{"a refusal, assumed", true, func(r *serverErrorRow, at time.Time) { r.failed(msg, at, at, false, true, false) }},
		{"a server error, assumed", true, func(r *serverErrorRow, at time.Time) { r.failed(msg, at, at, false, false, false) }},
		{"a refusal, not assumed", false, func(r *serverErrorRow, at time.Time) { r.failed(msg, at, at, false, true, false) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r serverErrorRow
			if c.assumed {
				r.assumeDown(t0)
			}
			failAt := t0.Add(2 * time.Second)
			c.failure(&r, failAt)
			r.remember(&Error{Kind: KindTransient, Reason: "status 503", Unreachable: true})
			_, e := r.admit(failAt.Add(100*time.Millisecond), defaultMaxProbeGap)
			if (e != nil) != c.assumed {
				t.Fatalf("a request 100 ms after the first failure: held back %v, want %v", e != nil, c.assumed)
			}
			// The next probe goes once a quarter of the outage (counted
			// from a second before the failure) has passed since it: 350
			// ms at +400 ms.
			if c.assumed {
				if _, e := r.admit(failAt.Add(300*time.Millisecond), defaultMaxProbeGap); e == nil {
					t.Fatal("a request 300 ms after: sent, want it held back (gap 325 ms)")
				}
				if probe, e := r.admit(failAt.Add(400*time.Millisecond), defaultMaxProbeGap); e != nil || !probe {
					t.Fatalf("a request 400 ms after: held back with %v (probe %v), want a probe", e, probe)
				}
			}
		})
	}
}
