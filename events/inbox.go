package events

import (
	"fmt"

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
