package main

import (
	"context"
	"strings"
	"testing"
)

// TestJetStreamCommandWithAFrontendsCredentialSaysWhichToUse: a command
// that needs the JetStream API (deadletters, publish checking the
// stream), run with a frontend's credential (the documented block of
// docs/operations.md, which grants no JetStream API), is refused, and
// the error says so: the JetStream API is memoryd's credential's, and not
// that client commands take an operator's credential in the frontends'
// account, which has no JetStream and would be refused the same.
func TestJetStreamCommandWithAFrontendsCredentialSaysWhichToUse(t *testing.T) {
	t.Parallel()
	url := natsWithConfig(t, `authorization { users: [
  { user: alice_frontend, password: p, permissions: {
      publish: { allow: ["memory.turns.alice", "memory.enrich.alice", "memory.stats.alice", "memory.facts.*.alice"] }
      subscribe: { allow: ["_INBOX_alice_frontend.>", "memory.changes.alice"] } } }
] }
`)
	for _, args := range [][]string{
		{"deadletters", "--user", "alice"},
		{"publish", "--user", "alice", "--message", "hi", "--response", "ok"},
	} {
		args = append(args, "--nats-url", url, "--nats-user", "alice_frontend", "--nats-password", "p", "--inbox-prefix", "_INBOX_alice_frontend")
		_, errOut, code := runArgs(context.Background(), args...)
		if code != 1 || !strings.Contains(errOut, "Permissions Violation for Publish to \"$JS.API.") ||
			!strings.Contains(errOut, "the JetStream API") || !strings.Contains(errOut, "memoryd's own credential") ||
			strings.Contains(errOut, "an operator's credential in the frontends' account") {
			t.Errorf("memoryd %s with a frontend's credential: exit %d, stderr %q; want exit 1, the JetStream API's refusal, memoryd's credential named for it (not an operator's in the frontends' account)", args[0], code, errOut)
		}
	}
}
