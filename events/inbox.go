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
func FrontendInbox(frontend string) nats.Option {
	if !plainToken.MatchString(frontend) {
		return func(*nats.Options) error {
			return fmt.Errorf("events: frontend name %q for the inbox prefix must match ^[A-Za-z0-9_-]{1,64}$", frontend)
		}
	}
	return nats.CustomInboxPrefix(InboxPrefix(frontend))
}

// refused returns the permissions violation the NATS server last reported
// on nc when it names subject (a request or publish to it, refused) or the
// connection's inbox (the reply's subscription, refused), or nil. A refused
// request is dropped, not answered, so the requester only times out; the
// connection's last error is what tells it from a memoryd that is down.
// A violation of another subject, or an older one replaced since, is not
// this request's.
func refused(nc *nats.Conn, subject string) error {
	if nc == nil {
		return nil
	}
	err := nc.LastError()
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	msg := err.Error()
	inbox := nc.Opts.InboxPrefix
	if inbox == "" {
		inbox = nats.InboxPrefix
	}
	if strings.Contains(msg, `"`+subject+`"`) || strings.Contains(msg, "Subscription to") && strings.Contains(msg, `"`+strings.TrimSuffix(inbox, ".")+".") {
		return err
	}
	return nil
}
