package extractor

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// signal returns a hook that sends on a new buffered channel without ever
// blocking the code under test.
func signal() (func(), chan struct{}) {
	ch := make(chan struct{}, 16)
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}, ch
}

func TestTokenBucket(t *testing.T) {
	t.Parallel()

	t0 := time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)
	b := newTokenBucket(2, 2, t0) // 2 per second, burst 2, starts full
	take := func(at time.Time, wantOK bool, wantWait time.Duration) {
		t.Helper()
		wait, ok := b.take(at)
		if ok != wantOK || wait != wantWait {
			t.Fatalf("take(t0+%v) = %v, %v; want %v, %v", at.Sub(t0), wait, ok, wantWait, wantOK)
		}
	}
	take(t0, true, 0)
	take(t0, true, 0)
	take(t0, false, 500*time.Millisecond)
	take(t0.Add(250*time.Millisecond), false, 250*time.Millisecond)
	take(t0.Add(500*time.Millisecond), true, 0)
	take(t0.Add(500*time.Millisecond), false, 500*time.Millisecond)
	b.refund()
	take(t0.Add(500*time.Millisecond), true, 0)
	// A long quiet period refills up to the burst, no more.
	later := t0.Add(time.Hour)
	take(later, true, 0)
	take(later, true, 0)
	take(later, false, 500*time.Millisecond)

	// A rate so low that the wait overflows a Duration is capped.
	slow := newTokenBucket(1e-300, 1, t0)
	take2 := func() (time.Duration, bool) { return slow.take(t0) }
	if _, ok := take2(); !ok {
		t.Fatal("first take from a full bucket failed")
	}
	if wait, ok := take2(); ok || wait != time.Duration(math.MaxInt64) {
		t.Errorf("take from an empty, very slow bucket = %v, %v; want the longest Duration", wait, ok)
	}
}

func TestLLMRateLimit(t *testing.T) {
	t.Parallel()

	t.Run("burst admits two of three concurrent calls", func(t *testing.T) {
		t.Parallel()
		const burst = 2
		srv := extractortest.NewServer(t)
		entered := make(chan struct{}, 8)
		release := make(chan struct{})
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the server closes
		srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
			entered <- struct{}{}
			<-release
			return extractortest.Content(validReply)
		})
		l := newTestLLM(t, srv, func(c *LLMConfig) {
			c.RequestsPerSecond = 0.001 // the next token is ~17 minutes away
			c.Burst = burst
		})
		hook, waiting := signal()
		l.waitingForToken = hook

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errs := make(chan error, burst+1)
		for range burst + 1 {
			go func() {
				_, err := l.Extract(ctx, testInput("I'm Ana"))
				errs <- err
			}()
		}

		// Wait until two requests are in the handler and one caller waits
		// for a token; a third request reaching the server fails at once.
		deadline := time.After(testDeadline)
		for nEntered, nWaiting := 0, 0; nEntered < burst || nWaiting < 1; {
			select {
			case <-entered:
				if nEntered++; nEntered > burst {
					t.Fatalf("%d requests reached the server, want at most Burst = %d", nEntered, burst)
				}
			case <-waiting:
				nWaiting++
			case <-deadline:
				t.Fatalf("gave up: %d requests in the handler, %d callers waiting for a token", nEntered, nWaiting)
			}
		}
		if got := srv.Requests(); got != burst {
			t.Errorf("requests = %d while the third caller waits, want %d", got, burst)
		}

		// The two admitted calls finish; the third still waits, until its
		// context ends.
		once.Do(func() { close(release) })
		for range burst {
			if err := <-errs; err != nil {
				t.Errorf("admitted Extract: %v", err)
			}
		}
		cancel()
		if err := <-errs; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrTransient) {
			t.Errorf("waiting Extract error = %v, want context.Canceled wrapped with ErrTransient", err)
		}
		if got := srv.Requests(); got != burst {
			t.Errorf("requests = %d, want %d", got, burst)
		}
		if got := l.Usage()["test-model"].Requests; got != burst {
			t.Errorf("usage requests = %d, want %d (a request never sent is not counted)", got, burst)
		}
	})

	t.Run("a correction waits for a token", func(t *testing.T) {
		t.Parallel()
		srv := extractortest.NewServer(t,
			extractortest.Content("not json"),
			extractortest.Content(validReply),
		)
		l := newTestLLM(t, srv, func(c *LLMConfig) { c.RequestsPerSecond = 0.001 }) // Burst defaults to 1
		hook, waiting := signal()
		l.waitingForToken = hook

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		errc := make(chan error, 1)
		go func() {
			_, err := l.Extract(ctx, testInput("I'm Ana"))
			errc <- err
		}()
		select {
		case <-waiting:
		case err := <-errc:
			t.Fatalf("Extract returned (%v) without its correction waiting for a token", err)
		case <-time.After(testDeadline):
			t.Fatal("the correction never waited for a token")
		}
		if got := srv.Requests(); got != 1 {
			t.Errorf("requests = %d while the correction waits, want 1", got)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrTransient) {
			t.Errorf("Extract error = %v, want context.Canceled wrapped with ErrTransient", err)
		}
		if got := srv.Requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
}

// TestLLMRateLimitedPausesOtherCalls: after A's 429, A fails at once with
// KindRetryAfter (no retry in the call); B, without a deadline, waits for
// the pause instead of sending; C, whose deadline the pause would outlast,
// fails at once with the pause left, without sending.
func TestLLMRateLimitedPausesOtherCalls(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t,
		extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{"error": {"message": "slow down"}}`,
			Header: http.Header{"Retry-After": {"3600"}}},
		extractortest.Content(validReply),
	)
	l := newTestLLM(t, srv, nil)
	hook, paused := signal()
	l.waitingForPause = hook

	_, err := l.Extract(t.Context(), testInput("I'm Ana"))
	if d, ok := RetryAfterOf(err); !ok || d != MaxRetryAfter {
		t.Fatalf("Extract A error = %v, want KindRetryAfter with the capped delay %v", err, MaxRetryAfter)
	}

	// B, independent of A, must not send until A's pause is over.
	ctxB, cancelB := context.WithCancel(t.Context())
	defer cancelB()
	errB := make(chan error, 1)
	go func() {
		_, err := l.Extract(ctxB, testInput("I'm Bea"))
		errB <- err
	}()
	select {
	case <-paused:
	case err := <-errB:
		t.Fatalf("Extract B returned (%v) without waiting for the pause after A's 429", err)
	case <-time.After(testDeadline):
		t.Fatal("Extract B never waited for the pause")
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("requests = %d while B waits, want only A's 1", got)
	}
	cancelB()
	if err := <-errB; !errors.Is(err, context.Canceled) || KindOf(err) != KindTransient {
		t.Errorf("Extract B error = %v, want context.Canceled in a KindTransient error", err)
	}

	// C's deadline ends long before the pause.
	ctxC, cancelC := context.WithTimeout(t.Context(), time.Minute)
	defer cancelC()
	_, err = l.Extract(ctxC, testInput("I'm Cid"))
	if d, ok := RetryAfterOf(err); !ok || d <= 0 || d > MaxRetryAfter {
		t.Errorf("Extract C error = %v, want KindRetryAfter with the pause left", err)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
	want := UsageTotals{Requests: 1, Errors: 1, RateLimited: 1}
	if got := l.Usage()["test-model"]; got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
}

func TestLLMPauseKeepsLatestDeadline(t *testing.T) {
	t.Parallel()

	l := &LLM{}
	t0 := time.Date(2024, 3, 15, 12, 0, 0, 0, time.UTC)
	if got := l.pauseLeft(t0); got != 0 {
		t.Fatalf("pause of a new LLM = %v, want 0", got)
	}
	l.pauseUntil(t0.Add(10 * time.Second))
	l.pauseUntil(t0.Add(5 * time.Second)) // earlier: ignored
	if got := l.pauseLeft(t0); got != 10*time.Second {
		t.Errorf("pause = %v, want the later deadline's 10s", got)
	}
	l.pauseUntil(t0.Add(20 * time.Second))
	if got := l.pauseLeft(t0); got != 20*time.Second {
		t.Errorf("pause = %v, want the extended 20s", got)
	}
	if got := l.pauseLeft(t0.Add(time.Minute)); got != 0 {
		t.Errorf("pause after the deadline = %v, want 0", got)
	}
}

func TestLLMUsageTotals(t *testing.T) {
	t.Parallel()

	t.Run("across calls and models", func(t *testing.T) {
		t.Parallel()
		srv := extractortest.NewServer(t,
			extractortest.Content(validReply),                           // call 1
			extractortest.Error(http.StatusInternalServerError, "oops"), // call 2 fails
			extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{}`, // call 3 fails
				Header: http.Header{"Retry-After": {"0"}}},
			extractortest.Content("not json"), // call 4: invalid output, corrected
			extractortest.Content(validReply), // calls 4 and 5 (other model)
		)
		l := newTestLLM(t, srv, func(c *LLMConfig) { c.Model = "model-a" })
		if got := l.Usage(); got == nil || len(got) != 0 {
			t.Fatalf("Usage() of a new LLM = %v, want an empty map", got)
		}

		var perCall Usage
		extract := func(wantKind Kind) {
			t.Helper()
			res, err := l.Extract(context.Background(), testInput("I'm Ana"))
			if KindOf(err) != wantKind {
				t.Fatalf("Extract error = %v, want kind %v", err, wantKind)
			}
			perCall.PromptTokens += res.Usage.PromptTokens
			perCall.CompletionTokens += res.Usage.CompletionTokens
		}
		for _, k := range []Kind{0, KindTransient, KindRetryAfter, 0} {
			extract(k)
		}
		// One LLM has one model; switching it between calls (no call in
		// flight) shows that totals are kept per model.
		l.cfg.Model = "model-b"
		extract(0)

		want := map[string]UsageTotals{
			"model-a": {PromptTokens: 30, CompletionTokens: 15, Requests: 5, OK: 3, Errors: 2, RateLimited: 1},
			"model-b": {PromptTokens: 10, CompletionTokens: 5, Requests: 1, OK: 1},
		}
		got := l.Usage()
		if len(got) != len(want) || got["model-a"] != want["model-a"] || got["model-b"] != want["model-b"] {
			t.Errorf("Usage() = %+v, want %+v", got, want)
		}
		var sum Usage
		for _, u := range got {
			sum.PromptTokens += int(u.PromptTokens)
			sum.CompletionTokens += int(u.CompletionTokens)
		}
		if sum != perCall {
			t.Errorf("total tokens %+v differ from the sum of Result.Usage %+v", sum, perCall)
		}
		if got := srv.Requests(); got != 6 {
			t.Errorf("requests = %d, want 6", got)
		}

		// The map is a copy.
		got["model-a"] = UsageTotals{}
		if l.Usage()["model-a"] != want["model-a"] {
			t.Error("changing the map returned by Usage() changed the totals")
		}
	})

	// A 4xx other than 429 is the server refusing the request (a key, a
	// model, a prompt): counted apart from its own failures, so that a
	// dashboard tells a wrong key from an outage.
	t.Run("refused apart from errors", func(t *testing.T) {
		t.Parallel()
		srv := extractortest.NewServer(t,
			extractortest.Error(http.StatusUnauthorized, "bad key"),
			extractortest.Error(http.StatusNotFound, "no such model"),
			extractortest.Error(http.StatusBadGateway, "upstream down"),
			extractortest.Error(http.StatusRequestTimeout, "too slow"), // the server's timeout, not a refusal
		)
		l := newTestLLM(t, srv, nil)
		for range 4 {
			if _, err := l.Extract(context.Background(), testInput("I'm Ana")); err == nil {
				t.Fatal("Extract succeeded against an error status")
			}
		}
		want := UsageTotals{Requests: 4, Errors: 4, Refused: 2}
		if got := l.Usage()["test-model"]; got != want {
			t.Errorf("usage = %+v, want %+v", got, want)
		}
	})

	t.Run("concurrent calls", func(t *testing.T) {
		t.Parallel()
		const calls = 8
		srv := extractortest.NewServer(t, extractortest.Content(validReply))
		l := newTestLLM(t, srv, nil)
		var wg sync.WaitGroup
		for range calls {
			wg.Go(func() {
				if _, err := l.Extract(context.Background(), testInput("I'm Ana")); err != nil {
					t.Errorf("Extract: %v", err)
				}
				_ = l.Usage() // read while others write
			})
		}
		wg.Wait()
		want := UsageTotals{PromptTokens: 10 * calls, CompletionTokens: 5 * calls, Requests: calls, OK: calls}
		if got := l.Usage()["test-model"]; got != want {
			t.Errorf("usage = %+v, want %+v", got, want)
		}
	})
}

// TestLLMRateLimitInA200Pauses: a gateway's 429 sent as an error object
// with status 200 is a 429: the call fails with KindRetryAfter of the
// reply's Retry-After, the next call waits for the pause rather than
// sending, and the request is counted as rate limited, not answered.
func TestLLMRateLimitInA200Pauses(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t,
		extractortest.Reply{Body: `{"error":{"code":429,"message":"slow down"}}`, Header: http.Header{"Retry-After": {"3600"}}},
		extractortest.Content(validReply),
	)
	l := newTestLLM(t, srv, nil)
	_, err := l.Extract(t.Context(), testInput("I'm Ana"))
	if d, ok := RetryAfterOf(err); !ok || d != MaxRetryAfter {
		t.Fatalf("Extract error = %v, want KindRetryAfter with the capped delay %v", err, MaxRetryAfter)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := l.Extract(ctx, testInput("I'm Bea")); KindOf(err) != KindRetryAfter {
		t.Errorf("Extract after the 429 error = %v, want KindRetryAfter without sending", err)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1: the second call must wait for the pause", got)
	}
	want := UsageTotals{Requests: 1, Errors: 1, RateLimited: 1}
	if got := l.Usage()["test-model"]; got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
}
