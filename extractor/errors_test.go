package extractor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrorKinds(t *testing.T) {
	t.Parallel()

	sentinels := []error{ErrTransient, ErrRetryAfter, ErrInvalidOutput, ErrPermanent}
	tests := []struct {
		name         string
		err          error
		wantKind     Kind
		wantSentinel error
		wantDelay    time.Duration
		wantCtx      bool
	}{
		{name: "transient", err: newError(KindTransient, "status 500"), wantKind: KindTransient, wantSentinel: ErrTransient},
		{name: "retry-after", err: &Error{Kind: KindRetryAfter, RetryAfter: 3 * time.Second, Reason: "status 429"},
			wantKind: KindRetryAfter, wantSentinel: ErrRetryAfter, wantDelay: 3 * time.Second},
		{name: "invalid output", err: newError(KindInvalidOutput, "no JSON object"), wantKind: KindInvalidOutput, wantSentinel: ErrInvalidOutput},
		{name: "permanent", err: newError(KindPermanent, "status 401"), wantKind: KindPermanent, wantSentinel: ErrPermanent},
		{name: "context", err: ctxError("model request", context.Canceled), wantKind: KindTransient, wantSentinel: ErrTransient, wantCtx: true},
		{name: "wrapped retry-after", err: fmt.Errorf("job 7: %w", &Error{Kind: KindRetryAfter, RetryAfter: time.Minute, Reason: "status 429"}),
			wantKind: KindRetryAfter, wantSentinel: ErrRetryAfter, wantDelay: time.Minute},
		{name: "joined permanent", err: errors.Join(errors.New("other"), newError(KindPermanent, "refused")), wantKind: KindPermanent, wantSentinel: ErrPermanent},
		{name: "not an extractor error", err: errors.New("connection refused"), wantKind: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := KindOf(tt.err); got != tt.wantKind {
				t.Errorf("KindOf = %v, want %v", got, tt.wantKind)
			}
			d, ok := RetryAfterOf(tt.err)
			if ok != (tt.wantKind == KindRetryAfter) || d != tt.wantDelay {
				t.Errorf("RetryAfterOf = %v, %v; want %v, %v", d, ok, tt.wantDelay, tt.wantKind == KindRetryAfter)
			}
			for _, s := range sentinels {
				if got := errors.Is(tt.err, s); got != (s == tt.wantSentinel) {
					t.Errorf("errors.Is(err, %v) = %v", s, got)
				}
			}
			if got := errors.Is(tt.err, context.Canceled); got != tt.wantCtx {
				t.Errorf("errors.Is(err, context.Canceled) = %v, want %v", got, tt.wantCtx)
			}
		})
	}
}

func TestLLMCallTimeout(t *testing.T) {
	t.Parallel()
	l, err := NewLLM(LLMConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Timeout: 7 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.CallTimeout(); got != 14*time.Second {
		t.Errorf("CallTimeout = %v, want 14s: two requests (one correction) of Timeout each", got)
	}
}
