package agenttools_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
)

// unreadSession runs a stdio session whose client sends an initialize and
// then reads nothing (its stdout never read: the agent hung, or busy
// elsewhere) while it keeps stdin open. It returns ServeIO's result
// channel and the function stopping the session (memoryd mcp's SIGTERM).
func unreadSession(t *testing.T, stall time.Duration) (<-chan error, context.CancelFunc) {
	t.Helper()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), User: "alice", Timeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if stall > 0 {
		agenttools.SetWriteStall(srv, stall)
	}
	in, feed := io.Pipe()
	t.Cleanup(func() { feed.Close() })
	outR, outW := io.Pipe() // never read
	t.Cleanup(func() { outR.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- srv.ServeIO(ctx, in, outW) }()
	// A pipe's write returns once it is read: the session has the request.
	if _, err := feed.Write([]byte(stdioInitialize + "\n")); err != nil {
		t.Fatal(err)
	}
	return done, cancel
}

// TestStdioStopWithAClientNotReading: a stop (memoryd mcp's SIGTERM) ends
// a stdio session whose client stopped reading, its answer dropped after
// the stop's grace. Before, the SDK closed the session only once the
// answer being written was, and that write blocked for good: the process
// never exited.
func TestStdioStopWithAClientNotReading(t *testing.T) {
	t.Parallel()
	done, stop := unreadSession(t, 0)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeIO stopped by its caller: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ServeIO still running a minute after its stop: the answer it could not write held it")
	}
}

// TestStdioClientNotReadingEndsTheSession: a client that reads none of
// its output for the write stall (DefaultWriteStall, a minute; here
// shorter) loses its session: ServeIO returns an error saying so. Before,
// the write blocked for good, holding the session and the process.
func TestStdioClientNotReadingEndsTheSession(t *testing.T) {
	t.Parallel()
	done, _ := unreadSession(t, 200*time.Millisecond)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "read none of its output") {
			t.Fatalf("ServeIO with a client not reading: %v; want an error saying it read none of its output", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ServeIO still running a minute after its client stopped reading")
	}
}
