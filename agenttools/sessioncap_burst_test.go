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
