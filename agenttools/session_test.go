package agenttools_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// TestIdleHTTPSessionsEnd: a session its client never closes (a crashed
// agent, a script that does not DELETE it) is closed once idle for
// Config.SessionTimeout, so it does not hold a goroutine and memory until
// the process ends; its id is then 404.
func TestIdleHTTPSessionsEnd(t *testing.T) {
	t.Parallel()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), Keys: keys{"alice-key": "alice"},
		SessionTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.Handler()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	post := func(sid, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alice-key")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp := post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list on a live session: %d", resp.StatusCode)
	}
	time.Sleep(2 * time.Second) // idle past the timeout: the behaviour under test, no synchronisation
	if resp := post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tools/list on a session idle past SessionTimeout: %d, want 404 (the session was never closed)", resp.StatusCode)
	}
}

// TestSearchSaysWhenTruncated: when memoryd leaves lower-ranked results out
// of a search reply to fit the NATS payload limit, search_memory says so
// (truncated), so that an agent knows to ask again with a lower limit
// rather than take the few results for all there are.
func TestSearchSaysWhenTruncated(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	for i := range 12 {
		var out struct{ Stored bool }
		call(t, s, "store_memory", map[string]any{"question": fmt.Sprintf("project alpha report number %d", i),
			"answer": strings.Repeat(fmt.Sprintf("alpha report details %d ", i), 9000)}, &out)
	}
	var out struct {
		Results   []struct{ ID int64 }
		Truncated bool
	}
	call(t, s, "search_memory", map[string]any{"query": "project alpha report", "limit": 12}, &out)
	if len(out.Results) == 12 || !out.Truncated {
		t.Fatalf("search of 12 items of ~200 KB: %d results, truncated %v; want fewer than 12 and truncated", len(out.Results), out.Truncated)
	}
}
