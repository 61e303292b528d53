package agenttools_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// TestSessionsPerUserAreBounded: a user's keys hold at most
// MaxUserSessions sessions at once; the next is refused (429) until one
// ends, and another user is not held back. Before, a key could open
// sessions without end, each kept for SessionTimeout.
func TestSessionsPerUserAreBounded(t *testing.T) {
	t.Parallel()
	url := serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, MaxUserSessions: 2,
		Keys: keys{"alice-key": "alice", "bob-key": "bob"}, Logger: slog.New(slog.DiscardHandler)})
	first := mustConnect(t, url, "alice-key")
	mustConnect(t, url, "alice-key")
	if _, err := connectHTTP(t, url, "alice-key"); err == nil || !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("alice's third session: %v, want it refused with 429", err)
	}
	mustConnect(t, url, "bob-key")        // another user
	if err := first.Close(); err != nil { // a DELETE: the session ends
		t.Fatal(err)
	}
	s := mustConnect(t, url, "alice-key")
	var facts struct{ Facts []fact }
	call(t, s, "list_facts", map[string]any{}, &facts)
}
