package agenttools_test

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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

// TestSessionCapConcurrentInitialize: initializes sent at once open
// MaxUserSessions sessions, no more (a review: 7 to 19 of 20 opened with a
// cap of 2, since the count was read before the new sessions were
// recorded).
func TestSessionCapConcurrentInitialize(t *testing.T) {
	t.Parallel()
	url := serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, MaxUserSessions: 2,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(slog.DiscardHandler)})
	const n = 20
	var opened atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer alice-key")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && resp.Header.Get("Mcp-Session-Id") != "" {
				opened.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if got := opened.Load(); got != 2 {
		t.Fatalf("%d sessions opened at once by one user, want the cap, 2", got)
	}
}
