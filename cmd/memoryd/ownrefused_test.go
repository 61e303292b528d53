package main

import (
	"context"
	"strings"
	"testing"
)

// TestClientCommandWithMemorydsCredentialSaysWhichToUse: a client command
// run with memoryd's own credential (the documented block of
// docs/operations.md, which sends no requests) is refused by the server,
// and the error says to run it with an operator's credential in the
// frontends' account, not to give a frontend's inbox prefix, which
// would not help (an operator's walk: `memoryd stats` on memoryd's host,
// its environment file sourced).
func TestClientCommandWithMemorydsCredentialSaysWhichToUse(t *testing.T) {
	t.Parallel()
	url := natsWithConfig(t, `authorization { users: [
  { user: memoryd, password: p, permissions: {
      publish: { allow: ["$JS.API.>", "$JS.ACK.>", "memory.deadletter.>", "memory.changes.>", "$KV.MEMORY_TURNS_FORGETS.>"] }
      subscribe: { allow: ["memory.>", "$SRV.>", "_INBOX.>"] }
      allow_responses: true } }
] }
`)
	for _, args := range [][]string{
		{"stats", "--user", "bob"},
		{"facts", "list", "--user", "bob"},
	} {
		args = append(args, "--nats-url", url, "--nats-user", "memoryd", "--nats-password", "p", "--timeout", "10s")
		_, errOut, code := runArgs(context.Background(), args...)
		if code != 1 || !strings.Contains(errOut, "the NATS server refused it") ||
			!strings.Contains(errOut, "memoryd's own credential sends no requests") ||
			!strings.Contains(errOut, "an operator's credential in the frontends' account") ||
			strings.Contains(errOut, "--inbox-prefix") {
			t.Errorf("memoryd %s with memoryd's credential: exit %d, stderr %q; want exit 1, the refusal, and that client commands take an operator's credential (no inbox prefix advice)", strings.Join(args[:2], " "), code, errOut)
		}
	}
}
