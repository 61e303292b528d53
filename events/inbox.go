package events

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// InboxPrefix returns the reply subject prefix of the frontend credential
// named frontend: "_INBOX_" + frontend. Its replies (enrich, facts, the
// JetStream acknowledgements of its turns) arrive on subjects under
// InboxPrefix(frontend) + ".", and its NATS user is granted subscribe on
// exactly InboxPrefix(frontend) + ".>" (docs/protocol.md). No frontend is
// granted the shared default "_INBOX.>", which would let it read every other
// credential's replies.
func InboxPrefix(frontend string) string { return "_INBOX_" + frontend }

// FrontendInbox is the connect option a Go frontend passes to nats.Connect so
// that the connection's requests, including those of Client and the
// JetStream publishes of Publisher, wait for their replies under
// InboxPrefix(frontend). frontend must match ^[A-Za-z0-9_-]{1,64}$ (one
// subject token); otherwise nats.Connect fails with an error naming it.
//
// It is nats.CustomInboxPrefix(InboxPrefix(frontend)) and TrackViolations,
// so that every request and turn the server refuses the connection is told
// (ErrRequestRefused, ErrReplyRefused): pass nats.ErrorHandler, if any,
// before it, e.g.
//
//	nats.Connect(url, nats.ErrorHandler(h), events.FrontendInbox("alice_frontend"))
//
// A handler passed after it replaces TrackViolations's (see there).
func FrontendInbox(frontend string) nats.Option {
	if !plainToken.MatchString(frontend) {
		return func(*nats.Options) error {
			return fmt.Errorf("events: frontend name %q for the inbox prefix must match ^[A-Za-z0-9_-]{1,64}$", frontend)
		}
	}
	inbox, track := nats.CustomInboxPrefix(InboxPrefix(frontend)), TrackViolations()
	return func(o *nats.Options) error {
		if err := inbox(o); err != nil {
			return err
		}
		return track(o)
	}
}

// Errors of a request or publish the NATS server refused this connection.
// Both wrap nats.ErrPermissionViolation. The server drops what it refuses
// and only reports it to the connection's error handler, so a plain
// request only times out; these tell that apart from a memoryd or a stream
// that is down.
var (
	// ErrRequestRefused: the request's or turn's subject is not this
	// credential's. Nothing was sent on: sending it again with this
	// credential fails again. On a connection made with TrackViolations
	// (FrontendInbox includes it) the request or turn ends with it as soon
	// as the server reports the refusal, without waiting out its deadline.
	ErrRequestRefused = fmt.Errorf("the NATS server refused this connection the subject: %w", nats.ErrPermissionViolation)
	// ErrReplyRefused: the reply's inbox is not this credential's (connect
	// with FrontendInbox). The request went out and may have been carried
	// out (a turn stored, a fact set): fix the inbox, then send it again,
	// a turn with the same id. It is told once the request's deadline
	// has passed (it wraps context.DeadlineExceeded too).
	ErrReplyRefused = fmt.Errorf("the NATS server refused this connection the reply's inbox, so the request may have been carried out: %w", nats.ErrPermissionViolation)
)

// refused says why a request to subject on nc that timed out was dropped,
// with the server's words: ErrRequestRefused when the server reported,
// after before (markViolations when the request was sent), that it
// refused a publish to subject; ErrReplyRefused when it has refused the
// subscription of nc's reply inbox (made once a connection, so reported
// once, and cleared by a reconnect, which subscribes again); else nil. A
// violation of another subject, or one reported before the request, is
// not this request's. With TrackViolations every violation reported on nc
// while the request waited is looked at; without it only nc's last error,
// as nats.go keeps no other, so an inbox refused and then another subject
// hides the inbox's, and of several requests refused at once only the
// last is told.
func refused(nc *nats.Conn, subject string, before violationMark) (kind error, violation string) {
	if nc == nil {
		return nil, ""
	}
	lastKind, lastViolation := refusedLast(nc, subject, before.last)
	l := before.log
	if l == nil {
		return lastKind, lastViolation
	}
	if v, ok := l.publishAfter(subject, before.seq); ok {
		return ErrRequestRefused, v
	}
	if lastKind == ErrRequestRefused {
		// Reported, but not yet passed to the error handler.
		return lastKind, lastViolation
	}
	if v, ok := l.inboxRefused(nc.Stats().Reconnects); ok {
		return ErrReplyRefused, v
	}
	return lastKind, lastViolation
}

// refusedLast is refused by nc's last error alone, before being it when
// the request was sent.
func refusedLast(nc *nats.Conn, subject string, before error) (kind error, violation string) {
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil, ""
	}
	msg := err.Error()
	// The server's words, without nats.go's prefix that kind repeats.
	violation = violationWords(err)
	if err != before && strings.HasSuffix(msg, `Publish to "`+subject+`"`) {
		return ErrRequestRefused, violation
	}
	if strings.Contains(msg, inboxSubscription(nc)) {
		return ErrReplyRefused, violation
	}
	return nil, ""
}
