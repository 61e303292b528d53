package extractor

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what a failed extraction means to the caller deciding whether to
// try again. The extractor never retries on its own; the kind is all a
// caller needs to schedule the next attempt (memoryd's worker maps it to a
// River outcome in one function).
type Kind int

// The kinds of [Error].
const (
	// KindTransient: the model server could not be reached, timed out, or
	// answered 408 or 5xx, or refused the configuration (401, 404, and
	// 403 to different requests in a row: [Error.Misconfigured]), or the
	// caller's context ended. A later attempt may succeed.
	// [Error.Unreachable] tells a server that is down apart.
	KindTransient Kind = iota + 1
	// KindRetryAfter: the server asked to slow down (429, or 503 with a
	// Retry-After header). [Error.RetryAfter] says for how long.
	KindRetryAfter
	// KindInvalidOutput: the model answered twice (the first reply and the
	// one correction asked for) with output that is not JSON of the
	// expected shape.
	KindInvalidOutput
	// KindPermanent: trying again cannot help: a 4xx other than 401, 404,
	// 408 and 429 (a bad request; a 403 of one request, such as a
	// moderation refusal), a refusal, a request the client library would
	// not send, or an input over a limit.
	KindPermanent
)

// String returns the kind's lowercase name.
func (k Kind) String() string {
	switch k {
	case KindTransient:
		return "transient"
	case KindRetryAfter:
		return "retry-after"
	case KindInvalidOutput:
		return "invalid output"
	case KindPermanent:
		return "permanent"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// MaxRetryAfter caps the delay an [Error] of KindRetryAfter carries, and
// how long an [LLM] pauses after one, whatever the server asked for.
const MaxRetryAfter = 10 * time.Minute

// defaultRetryAfter is the delay of a 429 that came without a usable
// Retry-After header.
const defaultRetryAfter = time.Second

// Error is the error of a failed Extract or ExtractBatch. Every error the
// extractors return is an *Error (use errors.As, or [KindOf] and
// [RetryAfterOf]); it also matches exactly one of the sentinels
// [ErrTransient], [ErrRetryAfter], [ErrInvalidOutput] and [ErrPermanent]
// with errors.Is, and the context's error when the context ended.
type Error struct {
	// Kind is what the failure means for a later attempt.
	Kind Kind
	// RetryAfter is how long to wait before the next attempt, for
	// KindRetryAfter: the server's Retry-After, at most MaxRetryAfter, or
	// 1s when the server gave none. Zero for the other kinds.
	RetryAfter time.Duration
	// Reason says what went wrong, briefly: a status code and the server's
	// short message, never a whole reply or response body.
	Reason string
	// Err is the underlying error when there is one worth matching, such
	// as context.Canceled; may be nil.
	Err error
	// Local is set on an error of KindRetryAfter when the wait was for
	// this client's own limits (every MaxConcurrency slot busy, or no
	// token of the rate limit) and no request was sent: the server asked
	// nothing. See [IsLocalWait].
	Local bool
	// Unreachable is set on an error of KindTransient when the model
	// server itself is down, restarting or loading a model: no connection
	// at all (refused, a name that does not resolve, no route) or a 502 or
	// 503, or a server error (500, 504, ...) or a timeout to the third
	// different request in a row of the client's, whatever their turns,
	// none of them a timeout while another request was answered. A
	// connection reset after it was made is not: it may be this request's
	// doing. Every request fails alike until it is back,
	// so a caller may wait for it rather than spend attempts. See
	// [IsUnreachable].
	Unreachable bool
	// Crashed is set on an error of KindTransient, not Unreachable, when
	// the connection was cut after the request was sent and, right after,
	// the server refused new connections: it went down with this request
	// in flight, which may be this request's doing (an input that runs it
	// out of memory, a tokenizer bug; every other request in flight is cut
	// too). See [IsCrashed].
	Crashed bool
	// Misconfigured is set with Unreachable when the server refuses every
	// request of this configuration (401 or 403: the API key; 404: the
	// model or the base URL): every turn would fail alike until an
	// operator fixes it, so a key rotated or a model not yet pulled is
	// waited for as an outage rather than failing every turn for good.
	Misconfigured bool
	// HeldBack is set with Unreachable on the error of a request that was
	// not sent: the server counts as down and another request probes it
	// (LLMConfig.MaxProbeGap).
	HeldBack bool
	// ProbeIn is set with HeldBack: how long until this client may send
	// its next probe (at least the gap when one is in flight). A request
	// held back that long may be the one sent. See [HeldBackFor].
	ProbeIn time.Duration
	// ReplyDigest is set on an error of KindInvalidOutput whose model
	// replies all had content: a digest (hex) of the request (the format
	// asked for, the prompts) and of each reply rejected, the same when
	// the model answers the same request with the same replies again. A
	// caller retrying the call can tell a model that repeats its mistake
	// (a local model at temperature 0 answers a prompt one way), which no
	// later attempt mends, from garbage that passes (sampling, a server
	// under load cutting its reply). Empty for replies without content
	// (only reasoning_content, only tool calls, no choices), whose
	// digest would not show what differs; reasoning in the content
	// (<think>) is digested as it is. Empty too for sampled replies
	// (a temperature above 0, or a reasoning model at the server's
	// default) of which one is shorter than 200 bytes: a canned refusal
	// repeats by chance (minSampledRepeat). See [ReplyDigestOf].
	ReplyDigest string
	// formatRefused is set on a 400 whose body names the response format
	// asked for (refusesFormat): the LLM asks again with less (stepFormat).
	formatRefused bool
}

// Error returns the sentinel's text, then the reason; for a Misconfigured
// error, what the server refuses instead of the sentinel's text.
func (e *Error) Error() string {
	if e.Local {
		return "extractor: request not sent, this client's own limits were busy: " + e.Reason
	}
	if e.Misconfigured {
		// Transient only in that it is waited for: "transient" read as
		// a passing fault in the failed list, for a key refused.
		return "extractor: model server refuses this configuration (API key, model or base URL): " + e.Reason
	}
	return e.sentinel().Error() + ": " + e.Reason
}

// IsLocalWait reports whether err holds an *Error of KindRetryAfter that
// waited for the client's own limits (Error.Local), not the server.
func IsLocalWait(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindRetryAfter && e.Local
}

// IsUnreachable reports whether err holds an *Error of KindTransient whose
// server could not be reached (Error.Unreachable).
func IsUnreachable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindTransient && e.Unreachable
}

// IsCrashed reports whether err holds an *Error of a request the server
// went down with (Error.Crashed).
func IsCrashed(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindTransient && e.Crashed
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

// IsMisconfigured reports whether err holds an *Error whose server refuses
// this configuration (Error.Misconfigured): an unreachable error that an
// operator, not time, fixes.
func IsMisconfigured(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == KindTransient && e.Unreachable && e.Misconfigured
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
	case KindInvalidOutput:
		return ErrInvalidOutput
	case KindPermanent:
		return ErrPermanent
	}
	return ErrTransient
}

// ReplyDigestOf returns the Error.ReplyDigest of the first *Error in err's
// chain of KindInvalidOutput, or "" when there is none.
func ReplyDigestOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Kind == KindInvalidOutput {
		return e.ReplyDigest
	}
	return ""
}

// KindOf returns the Kind of the first *Error in err's chain, or 0 when
// there is none (the error did not come from an extractor).
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

// Sentinel errors, one per Kind. Every error returned by Extract and
// ExtractBatch matches exactly one of them with errors.Is.
var (
	// ErrTransient is matched by errors of KindTransient.
	ErrTransient = errors.New("extractor: transient model server error")
	// ErrRetryAfter is matched by errors of KindRetryAfter.
	ErrRetryAfter = errors.New("extractor: model server asked to retry later")
	// ErrInvalidOutput is matched by errors of KindInvalidOutput.
	ErrInvalidOutput = errors.New("extractor: invalid model output")
	// ErrPermanent is matched by errors of KindPermanent.
	ErrPermanent = errors.New("extractor: permanent error")
)

// newError returns an *Error of kind with a formatted reason.
func newError(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// ctxError is the error of a call whose context ended.
func ctxError(what string, err error) *Error {
	return &Error{Kind: KindTransient, Reason: what + ": " + err.Error(), Err: err}
}
