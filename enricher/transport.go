package enricher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// subjectToken returns the last token of subject: the user token.
func subjectToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// handler adapts an endpoint to micro: validation on the delivery goroutine,
// the work on a request goroutine. The handler never blocks, so requests do
// not queue in the subscription behind one that waits for a slot.
func (s *Service) handler(ep endpoint) micro.Handler {
	st := s.stats[ep.name]
	return micro.HandlerFunc(func(req micro.Request) {
		received := time.Now()
		token := subjectToken(req.Subject())
		work, err := ep.handle(token, req.Data())
		if err != nil {
			s.replyError(req, ep, err)
			return
		}
		reply := req.Reply()
		spanCtx, span := s.startSpan(req, ep.name, token)
		mark := s.newAnswerMark()
		s.dispatch(ep.lane, token, received.Add(s.cfg.WriteTimeout), mark, func() {
			ctx, cancel := s.requestContext(spanCtx, received.Add(s.budget(ep)))
			defer cancel()
			res, err := work(ctx)
			st.workCount.Add(1)
			st.workNanos.Add(int64(time.Since(received)))
			mark.answered()
			if err != nil {
				code, desc := s.classify(ep, err)
				if code >= 500 {
					// A 404 or 409 the work decided is the caller's
					// answer, not a server error.
					st.serverErrors.Add(1)
				}
				s.publishError(ep.name, reply, code, desc)
				endSpan(span, code)
				return
			}
			endSpan(span, s.publish(ep.name, reply, res))
		}, func() {
			st.serverErrors.Add(1)
			s.publishError(ep.name, reply, 500, events.OverloadedDescription)
			endSpan(span, 500)
		})
	})
}

// requestContext is a request's context: its deadline, and cancelled by
// Stop's halt. One the drain hands over after the halt starts cancelled:
// AfterFunc would cancel it in a goroutine of its own, which the work could
// outrun.
func (s *Service) requestContext(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithDeadline(parent, deadline)
	unhook := context.AfterFunc(s.halted, cancel)
	if s.halted.Err() != nil {
		cancel()
	}
	return ctx, func() {
		unhook()
		cancel()
	}
}

// classify maps a call's error to a reply code and a description safe to
// show a caller; store errors are logged, not shown.
func (s *Service) classify(ep endpoint, err error) (int, string) {
	var (
		se *events.ServiceError
		ne *store.NewerSchemaError
		oe *store.OlderSchemaError
	)
	switch {
	case errors.As(err, &se):
		return se.Code, se.Description
	case errors.As(err, &ne):
		// What the operator must do, not a store failure; logged, as the
		// caller's request (a user's forget) was not done: a rolling
		// upgrade's previous-release serve refuses every forget and import
		// from the newer migration's commit until it stops.
		s.logger.Warn(msgSchemaRefused, "endpoint", ep.name, "error", ne.Error())
		return 500, ne.Error()
	case errors.As(err, &oe):
		s.logger.Warn(msgSchemaRefused, "endpoint", ep.name, "error", oe.Error())
		return 500, oe.Error()
	case errors.Is(err, store.ErrCommitUnconfirmed):
		// Before the deadline case: the commit's own bound passed, not the
		// request's budget, or its connection was lost once it was sent;
		// either way the write may have been done.
		msg := msgToolFailed
		if errors.Is(err, context.DeadlineExceeded) {
			msg = msgToolTimedOut
		}
		s.logger.Error(msg, "endpoint", ep.name, "error", err)
		return 500, unconfirmedDescription(err, s.budget(ep))
	case errors.Is(err, context.Canceled) && s.halted.Err() != nil:
		s.logger.Warn("request cancelled: the service stopped before it was done", "endpoint", ep.name)
		return 500, "memoryd stopped before this request was done: send it again"
	case errors.Is(err, context.DeadlineExceeded):
		s.logger.Error(msgToolTimedOut, "endpoint", ep.name, "error", err)
		return 500, fmt.Sprintf("memory store did not answer within %s", s.budget(ep))
	case store.IsDiskFull(err):
		// What the caller can do: wait (a disk-full walk's clear read
		// "memory store unavailable").
		s.logger.Error(msgToolFailed, "endpoint", ep.name, "error", err)
		return 500, "memory store cannot write for now (the database's disk is full): nothing was changed; send it again later"
	default:
		s.logger.Error(msgToolFailed, "endpoint", ep.name, "error", err)
		return 500, "memory store unavailable"
	}
}

// unconfirmedDescription is the 500 description of a write whose commit
// was not confirmed (err wraps store.ErrCommitUnconfirmed), naming why:
// the commit's own bound passed (store.CommitTimeoutError), the request's
// budget ended once a single-statement write was sent, memoryd stopped
// then, or the database connection was lost. It starts as the protocol
// documents ("memory store did not confirm the write:") and ends with
// what a caller does: read it back.
func unconfirmedDescription(err error, budget time.Duration) string {
	var timeout *store.CommitTimeoutError
	why := "its commit lost its database connection before it was confirmed"
	switch {
	case errors.As(err, &timeout):
		why = "its commit was not confirmed within " + timeout.Within.String()
	case errors.Is(err, context.DeadlineExceeded):
		why = "its commit was not confirmed within " + budget.String()
	case errors.Is(err, context.Canceled):
		why = "its commit was cut off by memoryd stopping"
	}
	return "memory store did not confirm the write: " + why + " and may have been done; read it back before sending it again"
}

// replyError answers a request refused on the delivery goroutine. The
// requester gets the full description (it names only what they sent); micro
// records what req.Error is given as the endpoint's last_error, which
// $SRV.STATS shows to anyone allowed to ask, so that gets only the code's
// generic text, never a user id, token or key.
func (s *Service) replyError(req micro.Request, ep endpoint, err error) {
	code, desc := s.classify(ep, err)
	s.logger.Debug("bad request", "endpoint", ep.name, "code", code, "error", desc)
	if s.failed != nil {
		s.failed.RequestFailed(ep.name, code)
	}
	detail := micro.WithHeaders(micro.Headers{micro.ErrorHeader: {desc}})
	if err := req.Error(fmt.Sprint(code), genericError(code), nil, detail); err != nil {
		s.logger.Warn("reply failed", "endpoint", ep.name, "code", code, "error", err)
	}
}

// genericError is the text of an error code without any request's data.
func genericError(code int) string {
	switch code {
	case 400:
		return "bad request"
	case 404:
		return "not found"
	case 413:
		return "reply too large"
	case 501:
		return "not enabled"
	default:
		return "server error"
	}
}

// publish and publishError answer from a request goroutine. They publish on
// the connection rather than through micro.Request, whose bookkeeping is not
// safe once the delivery goroutine has moved on. A reply over the
// connection's max payload would never be sent (the client would only time
// out): a fitter is cut to fit, anything else is answered with a 413. It
// returns the code answered, 0 for a reply.
func (s *Service) publish(name, reply string, v any) int {
	buf := replyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledReply {
			replyBuffers.Put(buf)
		}
	}()
	if err := encodeReply(buf, v); err != nil {
		s.publishError(name, reply, 500, "encode reply: "+err.Error())
		return 500
	}
	if reply == "" {
		return 0
	}
	limit := s.maxReply()
	if size := buf.Len(); size > limit {
		f, ok := v.(fitter)
		whole := false // whether f's whole reply may fit
		if d, isDropper := f.(oversizedDropper); isDropper {
			if g, dropped := d.withoutOversized(limit); dropped {
				f, whole = g, true // what is left may fit whole
			}
		}
		if !ok || !s.fit(buf, f, limit, whole) {
			desc := fmt.Sprintf("reply would be %d bytes, over the NATS max_payload of %d bytes", size, limit)
			if ok {
				desc += ": " + f.alone()
			} else if hint := tooLargeHint[name]; hint != "" {
				desc += ": " + hint
			}
			s.logger.Warn("reply too large", "endpoint", name, "bytes", size, "max_payload", limit)
			s.publishError(name, reply, 413, desc)
			return 413
		}
		s.logger.Debug("reply cut to fit", "endpoint", name, "bytes", size, "sent_bytes", buf.Len(), "max_payload", limit)
	}
	// Publish copies the data, so the buffer can go back to the pool.
	if err := s.cfg.Conn.Publish(reply, buf.Bytes()); err != nil {
		s.logger.Warn("reply failed", "endpoint", name, "bytes", buf.Len(), "max_payload", limit, "error", err)
	}
	return 0
}

// encodeReply writes v's JSON to buf (reset first), without the newline
// json.Encoder adds and without escaping <, > and & as \u003c...: that is
// the same JSON to every parser and up to six times shorter for HTML.
func encodeReply(buf *bytes.Buffer, v any) error {
	buf.Reset()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1)
	return nil
}

// maxReply is the most bytes a reply may take: the connection's max
// payload (the server's max_payload), or NATS's default when the
// connection does not say. A reply without headers may take all of it.
func (s *Service) maxReply() int {
	if p := int(s.cfg.Conn.MaxPayload()); p > 0 {
		return p
	}
	return defaultMaxPayload
}

const defaultMaxPayload = 1 << 20

// A fitter is a reply listing items that can be cut short: a page that
// then ends earlier (its cursor at the last item kept), or ranked results
// that then leave out the lowest. keep(n) is the reply with the first n
// items; n never goes below least() (1 for a page, so that a walk always
// advances). alone says which item is too large when even least() items
// do not fit.
//
// shell(n) is keep(n) with an empty list, its other fields (the cursor)
// as keep(n)'s; item(i) is the i-th item as keep's list holds it (a
// pointer to it, encoded as the list encodes it). keep(n) encoded is
// shell(n) encoded with the first n items and the commas between them
// inside its "[]": fit measures with them (see replySizes).
type fitter interface {
	listed() int
	least() int
	keep(n int) any
	shell(n int) any
	item(i int) any
	alone() string
}

// An oversizedDropper is a fitter whose items are ranked, not paged: an
// item too large for any reply is left out alone (withoutOversized), and
// the rest still fits as it can.
type oversizedDropper interface {
	withoutOversized(limit int) (fitter, bool)
}

// fit encodes into buf the longest cut of f that fits limit, reporting
// whether there is one; with whole, the whole reply is tried first (as it
// has not been encoded yet). Binary search, as fitOld did, on each cut's
// size added up from its items' (replySizes) rather than encoded: the
// same cut, with the items up to it encoded once each and the reply
// chosen encoded once, where every probe encoded a reply of up to a
// megabyte (a facts.history page 10 times, a facts.list page 16). Should
// the sizes ever disagree with the encoding, fitOld decides.
func (s *Service) fit(buf *bytes.Buffer, f fitter, limit int, whole bool) bool {
	z := replySizes{f: f, limit: limit, ends: []int{0}}
	if n, found := z.longest(whole); found {
		want, _ := z.size(n)
		if encodeReply(buf, f.keep(n)) == nil && buf.Len() == want {
			return true
		}
	} else if lo := f.least(); lo >= f.listed() || encodeReply(buf, f.keep(lo)) != nil || buf.Len() > limit {
		return false // none to cut, or the shortest cut, encoded, confirms it (a 413: rare)
	}
	if s.logger != nil {
		s.logger.Warn("reply size measured wrong: fitted by encoding", "bytes", buf.Len(), "max_payload", limit)
	}
	return (whole && encodeReply(buf, f.keep(f.listed())) == nil && buf.Len() <= limit) || s.fitOld(buf, f, limit)
}

// fitOld is fit by encoding each cut tried: the way when the sizes
// measured are wrong (they never should be).
func (s *Service) fitOld(buf *bytes.Buffer, f fitter, limit int) bool {
	fits := func(n int) bool { return encodeReply(buf, f.keep(n)) == nil && buf.Len() <= limit }
	lo, hi := f.least(), f.listed()-1
	if lo > hi || !fits(lo) {
		return false
	}
	for lo < hi {
		if mid := (lo + hi + 1) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return fits(lo)
}

// replySizes is the encoded sizes of a fitter's cuts, without encoding
// them: a cut's is its shell's plus its items' and the commas between
// them. Items are encoded once each, as far as a cut is asked about, and
// none past the first over limit (a cut holding it cannot fit).
type replySizes struct {
	f     fitter
	limit int
	// ends[n] is the bytes of the first n items and their commas.
	ends []int
	buf  bytes.Buffer
	enc  *json.Encoder
}

// size is keep(n)'s encoded size, or false when it is known to be over
// limit (or not to encode) without counting it all.
func (z *replySizes) size(n int) (int, bool) {
	for len(z.ends) <= n {
		i := len(z.ends) - 1
		if z.ends[i] > z.limit {
			return 0, false
		}
		if z.enc == nil {
			// One encoder for all the items; as encodeReply.
			z.enc = json.NewEncoder(&z.buf)
			z.enc.SetEscapeHTML(false)
		}
		z.buf.Reset()
		if z.enc.Encode(z.f.item(i)) != nil {
			z.ends = append(z.ends, z.limit+1) // no cut holding it encodes
			continue
		}
		sep := 0
		if i > 0 {
			sep = 1
		}
		z.ends = append(z.ends, z.ends[i]+sep+z.buf.Len()-1) // less Encode's newline
	}
	if z.ends[n] > z.limit {
		return 0, false
	}
	if err := encodeReply(&z.buf, z.f.shell(n)); err != nil {
		return 0, false
	}
	return z.buf.Len() + z.ends[n], true
}

// longest is the longest cut that fits by its size, found as fitOld
// finds it (the same cuts tried, in the same order, so the same cut
// whatever the sizes): with whole, the whole reply first.
func (z *replySizes) longest(whole bool) (int, bool) {
	if whole && z.fits(z.f.listed()) {
		return z.f.listed(), true
	}
	lo, hi := z.f.least(), z.f.listed()-1 // lo fits once checked; hi+1 does not
	if lo > hi || !z.fits(lo) {
		return 0, false
	}
	for lo < hi {
		if mid := (lo + hi + 1) / 2; z.fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true
}

// fits reports whether keep(n) fits limit.
func (z *replySizes) fits(n int) bool {
	size, ok := z.size(n)
	return ok && size <= z.limit
}

// tooLargeHint says, by endpoint, what to do about a reply too large to
// send: for context.get and facts.get a single thing too large for any
// reply (only text mostly of control characters, which JSON writes as 6
// bytes each, or a max_payload lowered below memoryd's text limits can
// make one); for docs.search results that are not cut to fit, whose
// chunks are up to a collection's chunk_tokens (8192: 32 KB) each, so
// that 50 of them pass 1 MiB (its 413 gave the sizes only).
var tooLargeHint = map[string]string{
	"context_get":        fromExport + ", or " + raisePayload,
	"facts_get":          fromExport + ", or " + raisePayload,
	"docs_search":        docsSearchHint,
	"shared_docs_search": docsSearchHint,
}

const docsSearchHint = "lower max_results (a chunk holds up to its collection's chunk_tokens), or " + raisePayload

// replyBuffers holds reply encoding buffers, so that a reply does not
// allocate and grow a new one; buffers over maxPooledReply are dropped
// rather than kept for every later reply.
var replyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledReply = 64 << 10

func (s *Service) publishError(name, reply string, code int, desc string) {
	if s.failed != nil {
		s.failed.RequestFailed(name, code)
	}
	if reply == "" {
		return
	}
	msg := &nats.Msg{Subject: reply, Header: nats.Header{}}
	msg.Header.Set(micro.ErrorHeader, desc)
	msg.Header.Set(micro.ErrorCodeHeader, fmt.Sprint(code))
	if err := s.cfg.Conn.PublishMsg(msg); err != nil {
		s.logger.Warn("reply failed", "endpoint", name, "code", code, "error", err)
	}
}

// The messages of the warnings and errors logged for a single request,
// which an outage repeats for every request.
const (
	msgDegraded     = "enrich degraded"
	msgStoreFailed  = "enrich store failed"
	msgToolTimedOut = "memory store timed out"
	msgToolFailed   = "memory store failed"
	// A forget or import refused because another release's migrations
	// are (or are not yet) applied: the user's request was not done.
	msgSchemaRefused = "request refused: the database's schema is another memoryd release's"
)

// PerRequestFailures are those messages: a process's log handler may hold
// back their repeats (memoryd's command does), every request being counted
// in the metrics all the same.
var PerRequestFailures = []string{msgDegraded, msgStoreFailed, msgToolTimedOut, msgToolFailed, msgSchemaRefused}
