package main

import (
	"context"
	"strings"
	"testing"
)

// TestPublishWaitRefusedStatsSaysSo: publish --wait with a credential the
// server refuses the stats request says so, as stats itself does, rather
// than "start a serve ... memoryd stats: context canceled" (an ops walk's
// publish --wait with memoryd's own credential, a serve running beside it).
func TestPublishWaitRefusedStatsSaysSo(t *testing.T) {
	t.Parallel()
	url := natsWithConfig(t, `authorization { users: [
  { user: u, password: p, permissions: { publish: { allow: ["p.turns.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
] }
`)
	_, errOut, code := runArgs(context.Background(), "publish", "--user", "alice", "--message", "hi", "--response", "ok", "--wait", "5s",
		"--ensure-stream=false", "--nats-url", url, "--nats-user", "u", "--nats-password", "p", "--prefix", "p")
	if code != 1 || !strings.Contains(errOut, `Permissions Violation for Publish to "p.stats.alice"`) || strings.Contains(errOut, "start one") {
		t.Fatalf("publish --wait, stats refused: exit %d, stderr %q; want the refusal named, not a serve to start", code, errOut)
	}
}
