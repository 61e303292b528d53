package embedding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
)

// testClient is a Client of srv with cfg.
func testClient(t *testing.T, srv *embeddingtest.Server, cfg Config) *Client {
	t.Helper()
	cfg.BaseURL = srv.URL
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// downAMinute makes the client's outage, and its last probe, a minute
// older: nothing is held back in an outage's first second, and a probe
// goes at most every gap.
func (c *Client) downAMinute() {
	c.down.mu.Lock()
	defer c.down.mu.Unlock()
	c.down.downSince = c.down.downSince.Add(-time.Minute)
	c.down.prober.Start(c.down.downSince)
}

// TestEmbedRefusedConfiguration: a key the server refuses (401, as a
// provider answers the old key after a rotation) or a model it does not
// have (404) is the configuration refused (IsMisconfigured): unreachable,
// waited for as an outage, no text's fault (InputMayBeCause false, not
// RefusedInput), and said so; before, a permanent error, for which the
// worker cancelled embed jobs. A 403 is one only when a different request
// was refused with one just before, none answered between: one alone may
// be that request's.
func TestEmbedRefusedConfiguration(t *testing.T) {
	ctx := context.Background()
	srv := embeddingtest.New(t)
	srv.SetKey("new-key-0123456789")
	c := testClient(t, srv, Config{APIKey: "old-key-0123456789", MaxProbeGap: -1})
	_, err := c.Embed(ctx, []string{"hello"})
	if !IsMisconfigured(err) || !IsUnreachable(err) || KindOf(err) != KindTransient || errors.Is(err, ErrPermanent) ||
		InputMayBeCause(err) || RefusedInput(err) {
		t.Fatalf("401: %v (misconfigured %v, unreachable %v, kind %v, input may be cause %v); want the configuration refused, no text's fault",
			err, IsMisconfigured(err), IsUnreachable(err), KindOf(err), InputMayBeCause(err))
	}
	if !strings.Contains(err.Error(), "refuses this configuration") || strings.Contains(err.Error(), "old-key") {
		t.Errorf("401: %q; want it to say the configuration is refused, the key hidden", err)
	}
	srv.SetKey("")
	srv.Fail(http.StatusNotFound, "")
	if _, err := c.Embed(ctx, []string{"hello"}); !IsMisconfigured(err) {
		t.Errorf("404: %v, want the configuration refused", err)
	}

	srv.Fail(http.StatusForbidden, "")
	c = testClient(t, srv, Config{MaxProbeGap: -1})
	for i, step := range []struct {
		text          string
		misconfigured bool
	}{
		{"a batch", false},       // one 403: that request's
		{"a batch", false},       // the same request again
		{"memory", true},         // a different one (the worker's control)
		{"another batch", true},  // and while refused, every request
		{"", false},              // (an answer)
		{"a third batch", false}, // a 403 after an answer is one alone again
	} {
		if step.text == "" {
			srv.Recover()
			if _, err := c.Embed(ctx, []string{"answered"}); err != nil {
				t.Fatal(err)
			}
			srv.Fail(http.StatusForbidden, "")
			continue
		}
		_, err := c.Embed(ctx, []string{step.text})
		if IsMisconfigured(err) != step.misconfigured || (!step.misconfigured && (KindOf(err) != KindPermanent || !InputMayBeCause(err))) {
			t.Errorf("403 %d (%q): %v (misconfigured %v, input may be cause %v); want misconfigured %v",
				i, step.text, err, IsMisconfigured(err), InputMayBeCause(err), step.misconfigured)
		}
	}
}

// TestEmbedDownServerIsProbed: a server refusing the key (401) or down
// (503) is sent a probe now and then, not every request: 200 calls send a
// few at most (200 before, each waiting embed job and each query its
// own). The requests held back fail as the probes do (unreachable;
// misconfigured for the key), unsent (HeldBackFor, NotSent: no text's
// fault); once a probe is answered, every request is sent again.
func TestEmbedDownServerIsProbed(t *testing.T) {
	ctx := context.Background()
	for name, misconfigured := range map[string]bool{"key refused": true, "loading model": false} {
		t.Run(name, func(t *testing.T) {
			srv := embeddingtest.New(t)
			if misconfigured {
				srv.SetKey("new-key-0123456789")
			} else {
				srv.Fail(http.StatusServiceUnavailable, "")
			}
			c := testClient(t, srv, Config{APIKey: "old-key-0123456789"})
			if _, err := c.Embed(ctx, []string{"first"}); !IsUnreachable(err) {
				t.Fatalf("first: %v, want unreachable", err)
			}
			c.downAMinute()
			const n = 200
			held := 0
			for i := range n {
				_, err := c.Embed(ctx, []string{fmt.Sprintf("text %d", i)})
				if !IsUnreachable(err) || IsMisconfigured(err) != misconfigured || InputMayBeCause(err) {
					t.Fatalf("call %d: %v (misconfigured %v, input may be cause %v), want unreachable, misconfigured %v, no text's fault",
						i, err, IsMisconfigured(err), InputMayBeCause(err), misconfigured)
				}
				if in, ok := HeldBackFor(err); ok {
					held++
					var e *Error
					if !errors.As(err, &e) || !e.NotSent || in > DefaultMaxProbeGap || !strings.Contains(err.Error(), "not sent") {
						t.Fatalf("call %d held back: %v (probe in %s); want not sent, its probe within the gap", i, err, in)
					}
				}
			}
			sent := srv.Requests() - 1
			if held != n-sent {
				t.Errorf("%d errors marked held back, want the %d not sent", held, n-sent)
			}
			if sent >= n/10 {
				t.Fatalf("%d calls sent %d requests to a server that is down, want a probe now and then", n, sent)
			}
			t.Logf("%d calls sent %d requests", n, sent)
			// Fixed: the next probe (its gap made past) is answered, and
			// every request is sent again.
			srv.SetKey("")
			srv.Recover()
			c.downAMinute()
			before := srv.Requests()
			for i := range 3 {
				if _, err := c.Embed(ctx, []string{fmt.Sprintf("after %d", i)}); err != nil {
					t.Fatalf("after the probe was answered, %d: %v", i, err)
				}
			}
			if got := srv.Requests() - before; got != 3 {
				t.Errorf("%d requests for 3 calls after the server answered, want 3", got)
			}
		})
	}
}

// TestEmbedProbeGivenBack: a probe whose caller gave up before any reply
// (a query's short deadline) told nothing of the server, and the next
// request probes at once rather than being held back for a gap: else a
// client whose requests all have deadlines shorter than a slow server's
// answer never saw it back.
func TestEmbedProbeGivenBack(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	c := testClient(t, srv, Config{})
	if _, err := c.Embed(context.Background(), []string{"first"}); !IsUnreachable(err) {
		t.Fatalf("first: %v, want unreachable", err)
	}
	c.downAMinute()
	srv.Recover()
	srv.SetDelay(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Embed(ctx, []string{"a query"})
		done <- err
	}()
	// Cancelled once the server has it.
	for srv.Requests() < 2 {
		select {
		case err := <-done:
			t.Fatalf("the probe ended before the server had it: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the probe: %v, want its context's end", err)
	}
	srv.SetDelay(0)
	if _, err := c.Embed(context.Background(), []string{"the next"}); err != nil {
		t.Fatalf("the next request: %v; want it sent as the probe, and answered", err)
	}
}

// TestEmbedTextForbiddenIsNotTheKey: a 403 to one text (a firewall before
// the server refusing what it holds) met again in a request of some of the
// same texts is still that text's, not the key's: the worker sends a
// blamed batch's texts again (its job alone, after the batch), and the
// second 403, to a different request but of the same text, was taken for
// the key (the client counted down, every request held back, the job
// waiting and the log and /readyz blaming the key). A request of none of
// the refused texts refused too (the worker's control) is the key's.
func TestEmbedTextForbiddenIsNotTheKey(t *testing.T) {
	ctx := context.Background()
	srv := embeddingtest.New(t)
	srv.FailContaining("firewalled", http.StatusForbidden)
	c := testClient(t, srv, Config{MaxProbeGap: -1})
	for i, batch := range [][]string{
		{"a dog named Rex", "a firewalled text"}, // a batch of two jobs
		{"a firewalled text"},                    // the job holding it, alone
		{"a firewalled text", "another"},         // batched again later
	} {
		_, err := c.Embed(ctx, batch)
		if IsMisconfigured(err) || KindOf(err) != KindPermanent || !InputMayBeCause(err) {
			t.Errorf("request %d %q: %v (misconfigured %v); want the text's 403, not the key's", i, batch, err, IsMisconfigured(err))
		}
	}
	srv.Recover()
	srv.Fail(http.StatusForbidden, "")
	if _, err := c.Embed(ctx, []string{"memory"}); !IsMisconfigured(err) {
		t.Errorf("a 403 to a request of none of the refused texts: %v, want the key's", err)
	}
}

// TestEmbedHeldBackTakesNoRateSlot: a request held back (the server down,
// another probing it) fails at once, without waiting for a slot under
// RequestsPerSecond or taking one, as the extractor's (its token is the
// last thing waited for). Before, each waited its turn to be told it was
// not sent, and moved the next real request's turn later by one.
func TestEmbedHeldBackTakesNoRateSlot(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	// One request every 1000 s: the first is sent at once, any other
	// waiting for its slot would outlast the test.
	c := testClient(t, srv, Config{RequestsPerSecond: 0.001})
	if _, err := c.Embed(context.Background(), []string{"first"}); !IsUnreachable(err) {
		t.Fatalf("first: %v, want unreachable", err)
	}
	// Down for a minute, probed just now: the next probe is a gap away.
	c.down.mu.Lock()
	c.down.downSince = c.down.downSince.Add(-time.Minute)
	c.down.mu.Unlock()
	c.mu.Lock()
	next := c.next
	c.mu.Unlock()
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.Embed(ctx, []string{fmt.Sprintf("text %d", i)})
		cancel()
		if _, held := HeldBackFor(err); !held {
			t.Fatalf("call %d: %v; want it held back at once, not after a rate slot", i, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.next.Equal(next) {
		t.Errorf("the requests held back moved the next rate slot by %s; want none taken", c.next.Sub(next))
	}
}

// TestEmbedHoldsBackAtOnceInAnOutageAssumed: a client told that the
// server is down (AssumeDown: a process starting while embed jobs wait
// for it) holds its requests back from the first failure on, as the
// extractor's does, not only from the outage's second second: a serve
// restarted during an outage sent each embed job's request in that second.
// An answer ends the assumption.
func TestEmbedHoldsBackAtOnceInAnOutageAssumed(t *testing.T) {
	ctx := context.Background()
	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "")
	c := testClient(t, srv, Config{})
	c.AssumeDown()
	if _, err := c.Embed(ctx, []string{"first"}); !IsUnreachable(err) {
		t.Fatalf("first: %v, want unreachable", err)
	}
	const n = 20
	for i := range n {
		if _, err := c.Embed(ctx, []string{fmt.Sprintf("text %d", i)}); !IsUnreachable(err) {
			t.Fatalf("call %d: %v, want unreachable", i, err)
		}
	}
	// A probe may go a quarter of the outage (counted from a second
	// before the failure) after it: at most a few in the calls' time.
	if sent := srv.Requests(); sent > 3 {
		t.Errorf("%d calls right after the first failure sent %d requests; want them held back", n+1, sent)
	}
	// Answered: the next outage starts as any does, its first second sent.
	srv.Recover()
	c.downAMinute()
	if _, err := c.Embed(ctx, []string{"answered"}); err != nil {
		t.Fatal(err)
	}
	srv.Fail(http.StatusServiceUnavailable, "")
	before := srv.Requests()
	for i := range 3 {
		_, _ = c.Embed(ctx, []string{fmt.Sprintf("later %d", i)})
	}
	if sent := srv.Requests() - before; sent != 3 {
		t.Errorf("a new outage after the answer: %d of 3 requests sent in its first second, want all (the assumption ended)", sent)
	}
}

// TestEmbedRateLimitEndsTheRowOf403s: a 429 between two 403s of
// different requests is an answer of the server's: the second 403 is that
// request's, not the key's, as the extractor takes it. Before, the first
// 403 still counted, and the second was taken for the key (the client
// counted down, every request held back, /readyz blaming the key).
func TestEmbedRateLimitEndsTheRowOf403s(t *testing.T) {
	ctx := context.Background()
	srv := embeddingtest.New(t)
	c := testClient(t, srv, Config{MaxProbeGap: -1})
	srv.Fail(http.StatusForbidden, "")
	if _, err := c.Embed(ctx, []string{"a batch"}); IsMisconfigured(err) || KindOf(err) != KindPermanent {
		t.Fatalf("a first 403: %v, want that request's", err)
	}
	srv.Fail(http.StatusTooManyRequests, "0")
	if _, err := c.Embed(ctx, []string{"another batch"}); KindOf(err) != KindRetryAfter {
		t.Fatalf("429: %v, want retry-after", err)
	}
	srv.Fail(http.StatusForbidden, "")
	if _, err := c.Embed(ctx, []string{"memory"}); IsMisconfigured(err) || KindOf(err) != KindPermanent {
		t.Errorf("a 403 after a 429: %v (misconfigured %v); want that request's, the row ended by the 429", err, IsMisconfigured(err))
	}
}
