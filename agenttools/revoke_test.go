package agenttools_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// liveKeys is a key set a test can revoke from while the server runs.
type liveKeys struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *liveKeys) Lookup(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	u, ok := k.m[key]
	return u, ok
}

func (k *liveKeys) revoke(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}

// serveLiveKeys serves the MCP handler with keys that the test may
// revoke, and sessions capped at maxSessions (0: the default).
func serveLiveKeys(t *testing.T, maxSessions int, keys map[string]string) (*liveKeys, string) {
	t.Helper()
	ks := &liveKeys{m: keys}
	return ks, serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, MaxUserSessions: maxSessions,
		Keys: ks, Logger: slog.New(slog.DiscardHandler)})
}

// initialize opens a session with key by a raw initialize and returns its
// id.
func initialize(t *testing.T, url, key string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize with %s: %d, session %q", key, resp.StatusCode, sid)
	}
	// Ended before the server closes (cleanups run last first): a session
	// not DELETEd keeps its reading goroutine until SessionTimeout, past
	// the test. One closed already (its key revoked) answers 404 or 401.
	t.Cleanup(func() { endSession(url, key, sid) })
	return sid
}

// endSession DELETEs session sid with key, whatever the answer.
func endSession(url, key, sid string) {
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestRevokedKeysSessionsFreeTheirSlots: the sessions a revoked key opened
// no longer count against its user's MaxUserSessions (security walk: a
// leaked key's sessions, revoked, held the user's slots until
// SessionTimeout, 30 minutes, and the user's new key got 429).
func TestRevokedKeysSessionsFreeTheirSlots(t *testing.T) {
	t.Parallel()
	ks, url := serveLiveKeys(t, 2, map[string]string{"leaked": "alice", "new": "alice", "bob-key": "bob"})
	initialize(t, url, "leaked")
	initialize(t, url, "leaked")
	ks.revoke("leaked")
	s := mustConnect(t, url, "new")
	var facts struct{ Facts []fact }
	call(t, s, "list_facts", map[string]any{}, &facts)
	// The cap still holds for the key in force: with both sessions busy
	// (their streams open; the client's own stream opens in the
	// background, so s is closed and another held), a third is refused.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	openStream(t, url, "new", initialize(t, url, "new"))
	openStream(t, url, "new", initialize(t, url, "new"))
	if _, err := connectHTTP(t, url, "new"); err == nil || !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many Requests") {
		t.Fatalf("alice's third session with her key in force: %v, want 429", err)
	}
}

// TestRevokedKeysStreamEnds: a session's GET event stream ends once the
// key it was opened with is revoked (it stayed connected until
// SessionTimeout), and the session is gone (404); another user's stream
// is not touched.
func TestRevokedKeysStreamEnds(t *testing.T) {
	t.Parallel()
	ks, url := serveLiveKeys(t, 0, map[string]string{"alice-key": "alice", "bob-key": "bob"})
	aliceSID, bobSID := initialize(t, url, "alice-key"), initialize(t, url, "bob-key")
	aliceConn, alice := openStream(t, url, "alice-key", aliceSID)
	openStream(t, url, "bob-key", bobSID)
	ks.revoke("alice-key")
	// The stream's chunked body ends (its last chunk): a timeout here
	// means it stayed open.
	_ = aliceConn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(alice); err != nil {
		t.Fatalf("revoked key's stream: %v, want it ended", err)
	}
	ks.mu.Lock()
	ks.m["alice-key"] = "alice" // put back: the session must be gone all the same
	ks.mu.Unlock()
	if code := toolsList(t, url, "alice-key", aliceSID); code != http.StatusNotFound {
		t.Fatalf("the revoked key's session after: %d, want 404 (closed)", code)
	}
	if code := toolsList(t, url, "bob-key", bobSID); code != http.StatusOK {
		t.Fatalf("bob's session after alice's key was revoked: %d, want 200", code)
	}
}

// openStream opens session sid's GET event stream with key and returns
// its connection and body once the server answered (the stream is then
// held open, the session busy, until the test ends or the connection is
// closed).
func openStream(t *testing.T, url, key, sid string) (net.Conn, io.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + key + "\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + sid +
		"\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream with %s: %v %v", key, resp, err)
	}
	return conn, resp.Body
}

// toolsList asks session sid for its tools with key and returns the status.
func toolsList(t *testing.T, url, key, sid string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlowBodyIsCutOff: a request whose body comes slower than
// Config.BodyTimeout is answered (an error) rather than held open without
// end (security walk: nothing bounded the body's read).
func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	resp := answerToAnUnsentBody(t, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-key\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\":")
	if resp.StatusCode < 400 {
		t.Fatalf("slow body: %d, want an error status", resp.StatusCode)
	}
}

// TestSlowBodyOfAProbeIsCutOff: a request the server answers without
// reading its body (a probe, which needs no key) is bounded by
// BodyTimeout too: net/http reads such a body before it sends the
// answer's headers, so a client without a key held it open unanswered by
// never sending the body it announced (a review: the probes were outside
// the deadline).
func TestSlowBodyOfAProbeIsCutOff(t *testing.T) {
	t.Parallel()
	answerToAnUnsentBody(t, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx")
}

// answerToAnUnsentBody sends raw, a request whose body never ends, to a
// server whose BodyTimeout is 200 ms, and returns its answer; none within
// 30 s (the request held open) fails the test.
func answerToAnUnsentBody(t *testing.T, raw string) *http.Response {
	t.Helper()
	url := serveHTTPConfig(t, agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, BodyTimeout: 200 * time.Millisecond,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(slog.DiscardHandler)})
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a body never sent: %v, want an answer (a timeout: held open)", err)
	}
	return resp
}

// TestSessionMovedToANewKeySurvivesTheOldOnesRevoke: a session used with
// a user's new key is not closed when the key that opened it is revoked
// (a review: the check read the opening key, so a client that rotated its
// key lost its session at the user's next initialize).
func TestSessionMovedToANewKeySurvivesTheOldOnesRevoke(t *testing.T) {
	t.Parallel()
	ks, url := serveLiveKeys(t, 0, map[string]string{"old": "alice", "new": "alice"})
	sid := initialize(t, url, "old")
	t.Cleanup(func() { endSession(url, "new", sid) }) // "old" is revoked by then
	if code := toolsList(t, url, "new", sid); code != http.StatusOK {
		t.Fatalf("the session with the new key: %d", code)
	}
	ks.revoke("old")
	initialize(t, url, "new") // counts alice's sessions, closing revoked keys' ones
	if code := toolsList(t, url, "new", sid); code != http.StatusOK {
		t.Fatalf("the session used with the new key after the old one's revoke: %d, want 200", code)
	}
}
