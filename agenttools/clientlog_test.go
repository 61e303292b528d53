package agenttools_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// records keeps the log records a handler is given.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r)
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// TestCallBeforeInitializeIsNoErrorLog: a tools/call without a session (a
// client that skipped initialize, or the TypeScript SDK's client calling
// after terminateSession()) is answered with an error, and the SDK's line
// for it is a warning: an error line a request of any key holder tripped
// alerts on errors (an MCP walk: 40 such POSTs, 40 ERROR lines).
func TestCallBeforeInitializeIsNoErrorLog(t *testing.T) {
	t.Parallel()
	logs := &records{}
	url := serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(logs)})
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer alice-key")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "invalid during session initialization") {
		t.Fatalf("tools/call before initialize: %d %s", resp.StatusCode, body)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	warned := false
	for _, r := range logs.rs {
		if r.Level >= slog.LevelError {
			t.Errorf("logged at %s: %q", r.Level, r.Message)
		}
		warned = warned || (r.Level == slog.LevelWarn && r.Message == "method invalid during initialization")
	}
	if !warned {
		t.Errorf("no warning of the call before initialize; logged %d records", len(logs.rs))
	}
}
