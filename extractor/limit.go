package extractor

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"sync"
	"time"
)

// tokenBucket is a requests-per-second limiter: it holds up to burst tokens,
// refilled at rate tokens per second, and starts full. It is safe for
// concurrent use.
type tokenBucket struct {
	rate  float64 // tokens per second, > 0 and finite
	burst float64 // >= 1

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newTokenBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

// take takes a token if one is available at now. Otherwise it reports how
// long until one will be; the caller waits and tries again, as other callers
// may take that token first.
func (b *tokenBucket) take(now time.Time) (wait time.Duration, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+elapsed.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return 0, true
	}
	secs := (1 - b.tokens) / b.rate
	if secs >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64), false
	}
	return max(time.Duration(math.Ceil(secs*float64(time.Second))), 1), false
}

// refund returns a token taken for a request that was then not sent.
func (b *tokenBucket) refund() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+1)
}

// waitToken waits for a token of the rate limit, if there is one, giving up
// when ctx ends, or, as acquire does, when a request could no longer finish
// before ctx's deadline (an *Error of KindRetryAfter).
func (l *LLM) waitToken(ctx context.Context) error {
	if l.bucket == nil {
		return nil
	}
	qctx, cancel := l.queueContext(ctx)
	defer cancel()
	hooked := false
	for {
		wait, ok := l.bucket.take(time.Now())
		if ok {
			return nil
		}
		if !hooked && l.waitingForToken != nil {
			l.waitingForToken()
			hooked = true
		}
		if err := sleepCtx(qctx, wait); err != nil {
			return l.queueError(ctx, "the request rate limit had no token")
		}
	}
}

// pauseUntil stops all requests of l from being sent before t; an earlier t
// than the current pause changes nothing.
func (l *LLM) pauseUntil(t time.Time) {
	l.pauseMu.Lock()
	defer l.pauseMu.Unlock()
	if t.After(l.pausedUntil) {
		l.pausedUntil = t
	}
}

// pauseLeft returns how long the shared pause still lasts at now, or 0.
func (l *LLM) pauseLeft(now time.Time) time.Duration {
	l.pauseMu.Lock()
	defer l.pauseMu.Unlock()
	return max(l.pausedUntil.Sub(now), 0)
}

// waitPause waits until the shared pause (after a 429) is over, giving up
// when ctx ends. The pause may be extended while waiting. When waiting would
// leave the request no time to complete (Timeout) before ctx's deadline, it
// returns an *Error of KindRetryAfter with the pause left instead, so that
// the caller schedules a later attempt rather than time out in this one.
func (l *LLM) waitPause(ctx context.Context) error {
	hooked := false
	for {
		now := time.Now()
		left := l.pauseLeft(now)
		if left <= 0 {
			return nil
		}
		if deadline, ok := ctx.Deadline(); ok && now.Add(left+l.cfg.Timeout).After(deadline) {
			return &Error{Kind: KindRetryAfter, RetryAfter: left,
				Reason: fmt.Sprintf("model server rate limited this client; paused for %s more, past the call's deadline", left.Round(time.Millisecond))}
		}
		if !hooked && l.waitingForPause != nil {
			l.waitingForPause()
			hooked = true
		}
		if err := sleepCtx(ctx, left); err != nil {
			return err
		}
	}
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// UsageTotals counts the HTTP requests an [LLM] sent to one model and the
// tokens they used, since the LLM was created. Requests that were never
// sent (the context ended while waiting for the rate limit, a concurrency
// slot or a 429 pause) are not counted.
type UsageTotals struct {
	// PromptTokens is the number of input tokens reported by the server.
	PromptTokens int64
	// CompletionTokens is the number of output tokens reported by the
	// server.
	CompletionTokens int64
	// Requests is the number of HTTP requests sent (corrections of an
	// invalid reply included): OK + Errors.
	Requests int64
	// OK counts requests answered with a readable completion, whatever its
	// content (a reply rejected as invalid output still used tokens).
	OK int64
	// Errors counts requests that failed: an error status, a connection
	// error, a timeout, a cancelled context or an unreadable response.
	Errors int64
	// RateLimited counts the Errors that were 429 Too Many Requests.
	RateLimited int64
	// Refused counts the Errors answered with another 4xx status: the
	// server refused the request (a key refused, a model unknown, a prompt
	// too long), which sending it again does not change; the other Errors
	// are the server's own (5xx) or no answer.
	Refused int64
}

// usageTracker accumulates UsageTotals by model. It is safe for concurrent
// use.
type usageTracker struct {
	mu     sync.Mutex
	totals map[string]UsageTotals
}

// record counts one sent request to model.
func (u *usageTracker) record(model string, promptTokens, completionTokens int, ok bool, status int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.totals == nil {
		u.totals = make(map[string]UsageTotals)
	}
	t := u.totals[model]
	t.Requests++
	if ok {
		t.OK++
		t.PromptTokens += int64(promptTokens)
		t.CompletionTokens += int64(completionTokens)
	} else {
		t.Errors++
	}
	switch {
	case ok:
	case status == http.StatusTooManyRequests:
		t.RateLimited++
	case refusal(status):
		t.Refused++
	}
	u.totals[model] = t
}

// snapshot returns a copy of the totals, never nil.
func (u *usageTracker) snapshot() map[string]UsageTotals {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]UsageTotals, len(u.totals))
	maps.Copy(out, u.totals)
	return out
}
