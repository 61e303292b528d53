package agenttools_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/events/eventstest"
)

// streamOpened is a client transport that reports when a GET (a session's
// event stream) has its response: the server is then holding it open.
type streamOpened struct {
	base   http.RoundTripper
	opened chan struct{}
}

func (s streamOpened) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet {
		select {
		case s.opened <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// TestStopWithAConnectedAgent: an agent connected with the SDK's client
// holds its session's GET stream open; Stop ends it rather than waiting
// for it as a request in flight, and ends the session. Before, every stop with an agent
// connected took the whole shutdown timeout (memoryd mcp's
// --shutdown-timeout) and failed with "context deadline exceeded".
func TestStopWithAConnectedAgent(t *testing.T) {
	t.Parallel()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), Keys: keys{"alice-key": "alice"},
		Listen: "127.0.0.1:0", Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{}, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr() + "/", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: streamOpened{bearer{"alice-key", http.DefaultTransport}, opened}}}
	s, err := client.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var facts struct{ Facts []fact }
	call(t, s, "list_facts", map[string]any{}, &facts)
	select {
	case <-opened:
	case <-time.After(30 * time.Second):
		t.Fatal("the SDK's client opened no GET stream")
	}
	if n := agenttools.LiveSessions(srv); n != 1 {
		t.Fatalf("%d sessions live before Stop, want 1", n)
	}

	// Long enough that a Stop waiting for the stream fails the test,
	// not the machine's speed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Fatalf("Stop with an idle connected agent: %v; want nil (nothing was in flight)", err)
	}
	// The session, its idle timer and its state, ends with the server:
	// it lived on for SessionTimeout (30 minutes by default).
	if n := agenttools.LiveSessions(srv); n != 0 {
		t.Fatalf("%d sessions live after Stop, want 0", n)
	}
}

// TestStdioStopIsNoError: a stdio session stopped by its caller (memoryd
// mcp on SIGTERM) logs nothing at error. The SDK logs the end as "server
// run cancelled" at Error, which tripped an operator's alerts.
func TestStdioStopIsNoError(t *testing.T) {
	t.Parallel()
	var logs eventstest.SyncBuffer
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), User: "alice", Timeout: 10 * time.Second,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	if err != nil {
		t.Fatal(err)
	}
	in, feed := io.Pipe()
	defer feed.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeIO(ctx, in, io.Discard) }()
	// The session runs once it has read a request.
	if _, err := feed.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeIO stopped by its caller: %v", err)
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("a stop by the caller logged an error:\n%s", logs.String())
	}
}
