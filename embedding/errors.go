package embedding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Kind says what a failed embedding request means for a later attempt. The
// client never retries on its own; memoryd's worker maps the kind to a River
// outcome in its one outcome function (worker/retry.go), as it does for the
// extractor's kinds.
type Kind int

// The kinds of [Error].
const (
	// KindTransient: the server could not be reached, timed out, answered
	// 408 or 5xx, or answered with a malformed reply (wrong count of
	// vectors, mixed dimensions); or refused the configuration (401, 404,
	// and 403 to two requests of no text in common in a row:
	// [Error.Misconfigured]);
	// or the caller's context ended. [Error.Unreachable] tells a server
	// that is down (or refusing the configuration) apart.
	KindTransient Kind = iota + 1
	// KindRetryAfter: the server asked to slow down (429, or 503 with a
	// Retry-After header). [Error.RetryAfter] says for how long.
	KindRetryAfter
	// KindPermanent: a 4xx other than 401, 404, 408 and 429 (input too
	// long, a bad request; a 403 of one request), llama.cpp's 500 for an
	// input over its physical batch, a request that could not be built,
	// or texts answered with unusable vectors ([Error.Unusable]).
	KindPermanent
)

// String returns the kind's lowercase name.
func (k Kind) String() string {
	switch k {
	case KindTransient:
		return "transient"
	case KindRetryAfter:
		return "retry-after"
	case KindPermanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// MaxRetryAfter caps the delay an [Error] of KindRetryAfter carries.
const MaxRetryAfter = 10 * time.Minute

// defaultRetryAfter is the delay of a 429 without a usable Retry-After.
const defaultRetryAfter = time.Second

// Error is the error of a failed Embed. Every error Embed returns is an
// *Error; it matches exactly one of [ErrTransient], [ErrRetryAfter] and
// [ErrPermanent] with errors.Is, and the context's error when the context
// ended.
type Error struct {
	// Kind is what the failure means for a later attempt.
	Kind Kind
	// RetryAfter is the delay for KindRetryAfter: the server's Retry-After,
	// at most MaxRetryAfter, or 1s when it gave none. Zero otherwise.
	RetryAfter time.Duration
	// Reason says briefly what went wrong, never a whole response body.
	Reason string
	// Err is an underlying error worth matching (context.Canceled); may be
	// nil.
	Err error
	// Status is the HTTP status the server answered with, 0 when none.
	Status int
	// NotSent is set on an error of KindTransient when the request was
	// never sent: no connection to the server could be made (refused, no
	// route, DNS, a dial that timed out), or the caller's context ended
	// while it waited for the client's concurrency or rate limit. None of
	// its texts can be the cause.
	NotSent bool
	// Unreachable is set on an error of KindTransient when the server
	// itself is down, restarting or loading its model: no connection could
	// be made (refused, a name that does not resolve, no route), or it
	// answered 502, 503 (without a Retry-After: with one it is
	// KindRetryAfter) or 504; or it refuses the configuration
	// (Misconfigured). Every request fails alike until it is back,
	// so a caller may wait for it rather than spend attempts (the worker's
	// embed jobs do, as extraction jobs do for the model server). See
	// [IsUnreachable].
	Unreachable bool
	// Misconfigured is set with Unreachable when the server refuses every
	// request of this configuration (401 or 403: the API key; 404: the
	// model or the base URL), as the extractor's Error.Misconfigured: every
	// request would fail alike until an operator fixes it (a key rotated
	// in --embed-api-key-file, a model pulled), so a caller waits for it
	// as for an outage rather than failing its texts for good. A 403 is
	// taken for one only when a request of none of the same texts was
	// refused with one just before, none answered between (the worker's control request
	// follows a batch's failure): one 403 alone may be that request's (a
	// firewall before a gateway refusing one text).
	Misconfigured bool
	// HeldBack is set with Unreachable (and NotSent) on the error of a
	// request that was not sent: the server counts as down, and another
	// request probes it (Config.MaxProbeGap). No text can be its cause.
	HeldBack bool
	// ProbeIn is set with HeldBack: how long until this client may send
	// its next probe (at least the gap when one is in flight). See
	// [HeldBackFor].
	ProbeIn time.Duration
	// Unusable are the indexes, in the texts of the Embed call, of those
	// the server answered with an unusable vector (a null, non-number or
	// non-finite entry, or all zero); Embed returned the others' vectors
	// with the error. Empty for any other error.
	Unusable []int
	// MixedDims is set when one call's vectors came in two sizes (one
	// reply, or two of its requests): maybe the server's answer to some
	// of its texts (MixedDims).
	MixedDims bool
	// tooLarge is set on llama.cpp's 500 for an input over its physical
	// batch, a refusal of the input as a 413 is (RefusedInput).
	tooLarge bool
}

// UnusableOf returns the indexes of the texts answered with an unusable
// vector, from the first *Error in err's chain ([Error.Unusable]).
func UnusableOf(err error) []int {
	var e *Error
	if errors.As(err, &e) {
		return e.Unusable
	}
	return nil
}

// MixedDims reports whether err is a call's vectors coming in two sizes
// ([Error.MixedDims]): a server whose answer's size depends on the text
// (a proxy routing some inputs to another model) answers those texts so
// every time, which their batch's halves find.
func MixedDims(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.MixedDims
}

// RefusedInput reports whether err is the server refusing a request's
// input as such (400, 413 or 422: a text longer than the model's context,
// a request too large; llama.cpp's 500 for an input over its physical
// batch), which another split of the same texts may pass; an
// authentication failure or an unknown model (401, 403, 404) is not.
func RefusedInput(err error) bool {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindPermanent {
		return false
	}
	if e.tooLarge {
		return true
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// InputMayBeCause reports whether the texts of the request that failed
// with err may be what failed it, so that a caller batching many callers'
// texts runs them apart next. Not when the server asked to slow down
// (KindRetryAfter), was never reached (NotSent, HeldBack), answered 502,
// 503 or 504 (no capacity, or a proxy without an upstream), refused the
// configuration (Misconfigured: the key, the model), or the caller's
// context was cancelled; nor when err holds no *Error (it is not the
// server's answer). Else (a 500, a timeout, a dropped connection, a
// refusal of the input, a lone 403, an unusable vector) it may be.
func InputMayBeCause(err error) bool {
	var e *Error
	if !errors.As(err, &e) || errors.Is(err, context.Canceled) {
		return false
	}
	switch {
	case e.Kind == KindRetryAfter, e.NotSent, e.Unreachable:
		return false
	case e.Status == http.StatusBadGateway, e.Status == http.StatusServiceUnavailable, e.Status == http.StatusGatewayTimeout:
		return false
	}
	return true
}

// IsUnreachable reports whether err holds an *Error of KindTransient whose
// server could not be reached ([Error.Unreachable]).
func IsUnreachable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindTransient && e.Unreachable
}

// IsMisconfigured reports whether err holds an *Error whose server refuses
// this configuration (Error.Misconfigured): an unreachable error that an
// operator, not time, fixes.
func IsMisconfigured(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindTransient && e.Unreachable && e.Misconfigured
}

// HeldBackFor reports whether err holds an *Error of a request that was
// not sent because the server counts as down (Error.HeldBack), and how
// long until this client's next probe may go (Error.ProbeIn).
func HeldBackFor(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.HeldBack {
		return e.ProbeIn, true
	}
	return 0, false
}

// Error returns the sentinel's text, then the reason; for a Misconfigured
// error, what the server refuses instead of the sentinel's text.
func (e *Error) Error() string {
	if e.Misconfigured {
		// Transient only in that it is waited for: "transient" read as a
		// passing fault, for a key refused.
		return "embedding: embeddings server refuses this configuration (API key, model, base URL or dimensions): " + e.Reason
	}
	return e.sentinel().Error() + ": " + e.Reason
}

// Unwrap returns the kind's sentinel and, when set, Err.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.sentinel()}
	}
	return []error{e.sentinel(), e.Err}
}

func (e *Error) sentinel() error {
	switch e.Kind {
	case KindRetryAfter:
		return ErrRetryAfter
	case KindPermanent:
		return ErrPermanent
	}
	return ErrTransient
}

// KindOf returns the Kind of the first *Error in err's chain, or 0.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// RetryAfterOf returns the delay of an error of KindRetryAfter in err's
// chain, and whether there is one.
func RetryAfterOf(err error) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindRetryAfter {
		return e.RetryAfter, true
	}
	return 0, false
}

// Sentinel errors, one per Kind.
var (
	// ErrTransient is matched by errors of KindTransient.
	ErrTransient = errors.New("embedding: transient server error")
	// ErrRetryAfter is matched by errors of KindRetryAfter.
	ErrRetryAfter = errors.New("embedding: server asked to retry later")
	// ErrPermanent is matched by errors of KindPermanent.
	ErrPermanent = errors.New("embedding: permanent error")
)

func newError(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}
