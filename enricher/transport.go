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
		s.dispatch(ep.lane, token, received.Add(s.cfg.WriteTimeout), func() {
			ctx, cancel := context.WithDeadline(spanCtx, received.Add(s.budget(ep)))
			defer cancel()
			defer context.AfterFunc(s.halted, cancel)()
			res, err := work(ctx)
			st.workCount.Add(1)
			st.workNanos.Add(int64(time.Since(received)))
			if err != nil {
				st.serverErrors.Add(1)
				code, desc := s.classify(ep, err)
				s.publishError(reply, code, desc)
				endSpan(span, code)
				return
			}
			s.publish(reply, res)
			endSpan(span, 0)
		}, func() {
			st.serverErrors.Add(1)
			s.publishError(reply, 500, events.OverloadedDescription)
			endSpan(span, 500)
		})
	})
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
		// What the operator must do, not a store failure.
		return 500, ne.Error()
	case errors.As(err, &oe):
		return 500, oe.Error()
	case errors.Is(err, context.Canceled) && s.halted.Err() != nil:
		s.logger.Warn("request cancelled: the service stopped before it was done", "endpoint", ep.name)
		return 500, "memoryd stopped before this request was done: send it again"
	case errors.Is(err, context.DeadlineExceeded):
		s.logger.Error(msgToolTimedOut, "endpoint", ep.name, "error", err)
		return 500, fmt.Sprintf("memory store did not answer within %s", s.budget(ep))
	default:
		s.logger.Error(msgToolFailed, "endpoint", ep.name, "error", err)
		return 500, "memory store unavailable"
	}
}

// replyError answers a request refused on the delivery goroutine. The
// requester gets the full description (it names only what they sent); micro
// records what req.Error is given as the endpoint's last_error, which
// $SRV.STATS shows to anyone allowed to ask, so that gets only the code's
// generic text, never a user id, token or key.
func (s *Service) replyError(req micro.Request, ep endpoint, err error) {
	code, desc := s.classify(ep, err)
	s.logger.Debug("bad request", "endpoint", ep.name, "code", code, "error", desc)
	detail := micro.WithHeaders(micro.Headers{micro.ErrorHeader: {desc}})
	if err := req.Error(fmt.Sprint(code), genericError(code), nil, detail); err != nil {
		s.logger.Warn("reply failed", "endpoint", ep.name, "error", err)
	}
}

// genericError is the text of an error code without any request's data.
func genericError(code int) string {
	switch code {
	case 400:
		return "bad request"
	case 404:
		return "not found"
	case 501:
		return "not enabled"
	default:
		return "server error"
	}
}

// publish and publishError answer from a request goroutine. They publish on
// the connection rather than through micro.Request, whose bookkeeping is not
// safe once the delivery goroutine has moved on.
func (s *Service) publish(reply string, v any) {
	buf := replyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledReply {
			replyBuffers.Put(buf)
		}
	}()
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		s.publishError(reply, 500, "encode reply: "+err.Error())
		return
	}
	if reply == "" {
		return
	}
	// Encode ends with a newline json.Marshal would not write; Publish
	// copies the data, so the buffer can go back to the pool.
	if err := s.cfg.Conn.Publish(reply, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); err != nil {
		s.logger.Warn("reply failed", "error", err)
	}
}

// replyBuffers holds reply encoding buffers, so that a reply does not
// allocate and grow a new one; buffers over maxPooledReply are dropped
// rather than kept for every later reply.
var replyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledReply = 64 << 10

func (s *Service) publishError(reply string, code int, desc string) {
	if reply == "" {
		return
	}
	msg := &nats.Msg{Subject: reply, Header: nats.Header{}}
	msg.Header.Set(micro.ErrorHeader, desc)
	msg.Header.Set(micro.ErrorCodeHeader, fmt.Sprint(code))
	if err := s.cfg.Conn.PublishMsg(msg); err != nil {
		s.logger.Warn("reply failed", "error", err)
	}
}

// The messages of the warnings and errors logged for a single request,
// which an outage repeats for every request.
const (
	msgDegraded     = "enrich degraded"
	msgStoreFailed  = "enrich store failed"
	msgToolTimedOut = "memory store timed out"
	msgToolFailed   = "memory store failed"
)

// PerRequestFailures are those messages: a process's log handler may hold
// back their repeats (memoryd's command does), every request being counted
// in the metrics all the same.
var PerRequestFailures = []string{msgDegraded, msgStoreFailed, msgToolTimedOut, msgToolFailed}
