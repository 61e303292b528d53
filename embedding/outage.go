package embedding

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memoryd/memoryd/internal/modelerr"
)

// While the embeddings server counts as down (a request found it
// unreachable or refusing the configuration: Error.Unreachable), a Client
// sends one request now and then to probe it and holds the others back
// unsent, with the error that found it down (Error.HeldBack), as the
// extractor's LLM does for the model server (extractor/llm.go,
// serverErrorRow). Its callers wait as for that error: the worker's embed
// jobs snooze, enrich answers lexically at once. Before, each waiting
// embed job sent its own request whenever its snooze ended (with writes
// coming in, each new write's job one more), and the server, refusing an
// old key or loading its model, was asked again and again for nothing.
//
// Unlike the extractor's row, a server error (500) or a timeout does not
// make the server count as down: the worker tells those apart itself
// (its control request, embedTexts), and a 500 may be one text's.

// downRow is whether the server counts as down, since when and with what
// error, and the probing. Safe for concurrent use.
type downRow struct {
	mu sync.Mutex
	// downSince is when the server was taken for down, zero while it is
	// not.
	downSince time.Time
	// prober dates the last probe (admit), or when the server was taken
	// for down, and holds whether that probe is in flight (probeDone).
	prober modelerr.Prober
	// downErr is the error of the last request that found the server
	// down (fail): what a request held back is told.
	downErr Error
	// forbidden are the texts (their hashes) of the requests refused
	// with a 403 since the last answer otherwise (refused).
	forbidden map[[32]byte]bool
	// assumed is when the server was assumed down without a failure of
	// this client's (assumeDown), zero when it was not or it answered
	// since; downBefore is how long the server counts as down before
	// downSince for admit: modelerr.MinHoldBack in an outage assumed,
	// else 0.
	assumed    time.Time
	downBefore time.Duration
	// failedAt is when a request last found the server down (fail),
	// zero once one is answered (answer): LastDown.
	failedAt time.Time
}

// assumeWindow is how long after assumeDown a first failure counts as
// the outage going on, as the extractor's serverErrorsWindow.
const assumeWindow = 5 * time.Minute

// assumeDown makes the server's next failure within assumeWindow of now
// (one that makes it count as down: fail) the outage other processes
// saw going on, not one starting: its requests are held back at once
// rather than from the outage's second second.
func (r *downRow) assumeDown(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assumed = now
}

// admit decides whether a request may be sent at now, as the extractor's
// serverErrorRow.admit (modelerr.HoldBack): while the server counts as down, from its first
// second on, one request is let through at most every gap (a quarter of
// the outage so far, at most maxGap), and only when the one before has
// ended (probeDone), and the others get the error that found it down
// without being sent. probe reports that the request let through is a
// probe: the caller calls probeDone once its outcome is noted. A nil error
// means send.
func (r *downRow) admit(now time.Time, maxGap time.Duration) (probe bool, held *Error) {
	if maxGap < 0 {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		return false, nil
	}
	probe, hold, probeIn := r.prober.Admit(now, now.Sub(r.downSince)+r.downBefore, maxGap)
	if !hold {
		return probe, nil
	}
	e := r.downErr
	e.Err, e.HeldBack, e.NotSent, e.Status, e.ProbeIn = nil, true, true, 0, probeIn
	e.Reason = modelerr.HeldReason("the embeddings server", e.Misconfigured, r.downSince, maxGap, r.downErr.Reason)
	return false, &e
}

// probeDone ends the probe admit let through: the next may be sent.
func (r *downRow) probeDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prober.Done()
}

// giveBack ends a probe that told nothing of the server (its caller gave
// up before an answer: a query's short deadline, a shutdown): the next
// request may probe at once. Without it, a client whose every request has
// a deadline shorter than the server's answer held back every other
// request for a gap after each.
func (r *downRow) giveBack(probed time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prober.GiveBack(probed)
}

// fail takes the server for down from now, unless it already is, with e
// (an Unreachable error) as what requests held back are told: of a
// refusal of the configuration the server's message ("invalid api key",
// "model not found"), of any other failure only its kind and status
// ("status 503", "connection error"), since a server's message may quote
// the request's texts in words the echo check does not catch, and the
// requests held back are other users'.
func (r *downRow) fail(now time.Time, e *Error) {
	reason := e.Reason
	if !e.Misconfigured {
		reason, _, _ = strings.Cut(reason, ": ")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() {
		r.downSince = now
		r.prober.Start(now)
		r.downBefore = 0
		if !r.assumed.IsZero() && now.Sub(r.assumed) <= assumeWindow {
			r.downBefore = modelerr.MinHoldBack
		}
	}
	r.failedAt = now
	r.downErr = Error{Kind: e.Kind, Reason: reason, Unreachable: true, Misconfigured: e.Misconfigured}
}

// answer ends the server's being down: a request was answered, at now. It
// returns for how long it was, once, 0 when it was not.
func (r *downRow) answer(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forbidden, r.assumed = nil, time.Time{}
	if r.downSince.IsZero() {
		return 0
	}
	down := max(now.Sub(r.downSince), time.Nanosecond)
	r.downSince, r.downErr, r.failedAt = time.Time{}, Error{}, time.Time{}
	return down
}

// askedToWait notes a request the server answered asking to slow down (a
// 429, a 503 with Retry-After): it ends the row of 403s and an outage
// assumed, as any answer does, but not the server's being down, which
// only a reply ends, as the extractor's serverErrorRow.answer with
// replied false. Before, a 429 left the 403s before it counted, and one
// more 403 after it was taken for the key where the extractor took it
// for that request's.
func (r *downRow) askedToWait() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forbidden, r.assumed = nil, time.Time{}
}

// refused records a 403 to a request of batch and reports whether it is
// the configuration's: a request of none of the texts refused with one
// since the last answer otherwise was refused too, or the server counts as
// down refusing the configuration already. One 403 alone may be that
// request's (a firewall before a gateway refusing one text): the worker
// follows a batch's failure that a text may have caused with a request of
// one short text (its control), which a server refusing the key refuses
// too. Two, not the extractor's three: the control is the second, and
// with three the batch's job was cancelled before the third came. Not two
// requests sharing a text: the worker sends a refused text again, in its
// job alone or in a later batch, and a 403 to it was blamed on the key.
func (r *downRow) refused(batch []string) bool {
	keys := make([][32]byte, len(batch))
	for i, t := range batch {
		keys[i] = sha256.Sum256([]byte(t))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.downSince.IsZero() && r.downErr.Misconfigured {
		return true
	}
	if r.forbidden == nil {
		r.forbidden = map[[32]byte]bool{}
	}
	if len(r.forbidden) > 0 && !slices.ContainsFunc(keys, func(k [32]byte) bool { return r.forbidden[k] }) {
		return true
	}
	for _, k := range keys {
		if len(r.forbidden) >= maxForbidden {
			break
		}
		r.forbidden[k] = true
	}
	return false
}

// maxForbidden bounds the texts refused with a 403 that refused
// remembers (a batch is at most 2048 texts).
const maxForbidden = 4096

// note records the outcome of a request sent (err, nil when it was
// embedded; status, the reply's, 0 when none came): an error that found
// the server down makes it count as down (fail); a reply other than a 403
// or a request to slow down (429, a 503 with Retry-After) ends it, which
// is logged once (answered); a request to slow down ends the row of 403s
// (askedToWait); a probe whose caller gave up before any reply is given
// back.
func (c *Client) note(ctx context.Context, err error, status int, probe bool, probed time.Time) {
	var e *Error
	isErr := errors.As(err, &e)
	switch {
	case isErr && e.Unreachable:
		c.down.fail(time.Now(), e)
	case status != 0 && isErr && e.Kind == KindRetryAfter:
		c.down.askedToWait()
	case status != 0 && status != http.StatusForbidden:
		c.answered(time.Now())
	case probe && status == 0 && ctx.Err() != nil:
		c.down.giveBack(probed)
	}
}

// answered ends the server's being down (downRow.answer); the first
// reply after it says so, at info after an outage of at least outageTold,
// else at debug, as the extractor's does for the model server.
func (c *Client) answered(now time.Time) {
	down := c.down.answer(now)
	if down == 0 {
		return
	}
	level := slog.LevelDebug
	if down >= outageTold {
		level = slog.LevelInfo
	}
	c.cfg.Logger.Log(context.Background(), level, "embeddings server answering again", "model", c.cfg.Model,
		"down_for", down.Round(time.Millisecond).String())
}

// outageTold is the shortest outage whose end is logged at info.
const outageTold = 30 * time.Second
