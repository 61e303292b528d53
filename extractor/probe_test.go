package extractor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestDownServerIsProbedNotAskedByEveryJob: a server refusing the key
// (401) or down (503) is sent a probe now and then, not every request:
// 200 extractions in a row send a few dozen at most (200 before: a
// rotation walk counted 4,660 refused requests in 100 s). The requests
// held back fail as the probes do (unreachable; misconfigured for the
// key), so the worker waits for them alike; once a probe is answered,
// every request is sent again.
func TestDownServerIsProbedNotAskedByEveryJob(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		down          extractortest.Reply
		misconfigured bool
	}{
		"key refused":   {extractortest.Error(http.StatusUnauthorized, "invalid api key"), true},
		"loading model": {extractortest.Error(http.StatusServiceUnavailable, "loading model"), false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, c.down)
			l, err := NewLLM(LLMConfig{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			// The first fails and makes the server count as down; the
			// outage is then made a minute old (nothing is held back in
			// its first second).
			if _, err := l.Extract(context.Background(), testInput("I'm Ana")); !IsUnreachable(err) {
				t.Fatalf("first extraction: %v, want unreachable", err)
			}
			l.serverErrors.mu.Lock()
			l.serverErrors.downSince = l.serverErrors.downSince.Add(-time.Minute)
			l.serverErrors.prober.Start(l.serverErrors.downSince)
			l.serverErrors.mu.Unlock()
			const n = 200
			held := 0
			for i := range n {
				_, err := l.Extract(context.Background(), testInput(fmt.Sprintf("I'm Ana %d", i)))
				if !IsUnreachable(err) || IsMisconfigured(err) != c.misconfigured {
					t.Fatalf("extraction %d: %v (unreachable %v, misconfigured %v), want unreachable, misconfigured %v",
						i, err, IsUnreachable(err), IsMisconfigured(err), c.misconfigured)
				}
				if e := (*Error)(nil); errors.As(err, &e) && e.HeldBack {
					held++
				}
			}
			if sent := srv.Requests() - 1; held != n-sent {
				t.Errorf("%d errors marked held back, want the %d not sent", held, n-sent)
			}
			// One probe every 5 s (a quarter of the outage, capped): the
			// first of the n, and one more for each 5 s they take.
			if got := srv.Requests() - 1; got >= n/10 {
				t.Fatalf("%d extractions sent %d requests to a server that is down, want a probe now and then", n, got)
			}
			t.Logf("%d extractions sent %d requests", n, srv.Requests()-1)
		})
	}
}

// TestHungServerIsProbedOneRequestAtATime: requests that waited for a
// request slot behind ones that found the server down are held back once
// they get it, and while a probe is in flight no other request is sent,
// however long it has been. Before, a request was let through when it
// started waiting for a slot, and a probe every gap: with requests that
// time out (a hung server, --llm-timeout 30s over the 5 s gap) every slot
// stayed filled, as many requests as before the probing (a probe walk:
// 4 requests every 5 s for the first 40 s of a hang with --llm-timeout 5s,
// 20 workers). MaxProbeGap of a nanosecond stands for a --llm-timeout far
// over the gap.
func TestHungServerIsProbedOneRequestAtATime(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t)
	entered := make(chan chan extractortest.Reply, 8)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the server's Close, which waits for the handlers
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		reply := make(chan extractortest.Reply, 1)
		entered <- reply
		select {
		case r := <-reply:
			return r
		case <-stop:
			return extractortest.Error(http.StatusServiceUnavailable, "test over")
		}
	})
	l := newTestLLM(t, srv, func(c *LLMConfig) { c.MaxConcurrency, c.MaxProbeGap = 2, time.Nanosecond })
	waiting := make(chan struct{}, 8)
	l.waitingForSlot = func() { waiting <- struct{}{} }
	deadline := time.After(testDeadline)
	extract := func(name string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := l.Extract(context.Background(), testInput("I'm Ana, "+name))
			done <- err
		}()
		return done
	}
	in := func(what string) chan extractortest.Reply {
		t.Helper()
		select {
		case r := <-entered:
			return r
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		}
		return nil
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-waiting:
		case <-deadline:
			t.Fatalf("gave up waiting for %s to wait for a slot", what)
		}
	}
	result := func(what string, done chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-entered:
			t.Fatalf("%s was sent while a probe of a server that is down was in flight", what)
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		}
		return nil
	}
	down := extractortest.Error(http.StatusServiceUnavailable, "loading model")

	// a and b take both slots while the server answers; c and d wait.
	a := extract("a")
	replyA := in("a")
	b := extract("b")
	replyB := in("b")
	c := extract("c")
	wait("c")
	d := extract("d")
	wait("d")

	// a finds the server down: c, next in a slot, probes it (it may be
	// sent before a's caller has its result).
	replyA <- down
	var errA error
	select {
	case errA = <-a:
	case <-deadline:
		t.Fatal("gave up waiting for a")
	}
	if !IsUnreachable(errA) {
		t.Fatalf("a: %v, want unreachable", errA)
	}
	replyC := in("c, the probe")
	// b fails too; d, in its slot, is held back while c is in flight.
	replyB <- down
	if err := result("b", b); !IsUnreachable(err) {
		t.Fatalf("b: %v, want unreachable", err)
	}
	if err := result("d", d); !IsUnreachable(err) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("d: %v, want held back, unreachable", err)
	}
	for i := range 5 {
		name := fmt.Sprintf("e%d", i)
		if err := result(name, extract(name)); !IsUnreachable(err) || !strings.Contains(err.Error(), "not sent") {
			t.Fatalf("%s: %v, want held back, unreachable", name, err)
		}
	}
	// The probe is answered: every request is sent again.
	replyC <- extractortest.Content(validReply)
	if err := result("c", c); err != nil {
		t.Fatalf("c, the probe answered: %v", err)
	}
	f := extract("f")
	in("f, after the server answered") <- extractortest.Content(validReply)
	if err := result("f", f); err != nil {
		t.Fatalf("f: %v", err)
	}
	if got := srv.Requests(); got != 4 {
		t.Fatalf("%d requests sent, want 4 (a, b, the probe c, f)", got)
	}
}
