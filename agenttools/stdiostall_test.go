package agenttools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
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

// TestStdioSlowReaderKeepsTheSession: a client that reads its output
// steadily but slowly, one answer taking longer than the write stall to
// read in full, keeps its session and gets the whole answer: the stall
// bounds the time with no progress, not the whole write. Before, it bounded
// the whole write: a client reading 1 KiB a second (an agent on a loaded
// machine or a slow link) lost its session on any answer of 60 KiB.
func TestStdioSlowReaderKeepsTheSession(t *testing.T) {
	t.Parallel()
	const stall = time.Second
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), User: "alice", Timeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	agenttools.SetWriteStall(srv, stall)
	in, feed := io.Pipe()
	defer feed.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	done := make(chan error, 1)
	go func() {
		err := srv.ServeIO(context.Background(), in, outW)
		outW.Close()
		done <- err
	}()
	// The client reads at once until slow, then 1 KiB every 20 ms: 4 KiB
	// well within the stall, the answer below (about 100 KiB) not.
	var slow atomic.Bool
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var line []byte
		buf := make([]byte, 32<<10)
		for {
			p := buf
			if slow.Load() {
				<-tick.C
				p = buf[:1<<10]
			}
			n, err := outR.Read(p)
			line = append(line, p[:n]...)
			for {
				i := bytes.IndexByte(line, '\n')
				if i < 0 {
					break
				}
				lines <- string(line[:i])
				line = line[i+1:]
			}
			if err != nil {
				return
			}
		}
	}()
	answer := func(id string) string {
		t.Helper()
		for l := range lines {
			if strings.Contains(l, `"id":`+id+`,`) {
				return l
			}
		}
		t.Fatalf("the output ended before the answer to request %s; ServeIO: %v", id, <-done)
		return ""
	}
	send := func(l string) {
		t.Helper()
		if _, err := feed.Write([]byte(l + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	send(stdioInitialize)
	answer("1")
	send(stdioInitialized)
	value := strings.Repeat("v", 8000)
	const facts = 6
	for i := range facts {
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"set_fact","arguments":{"key":"note%d","value":%q}}}`, 10+i, i, value))
		answer(strconv.Itoa(10 + i))
	}
	slow.Store(true)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}`)
	var res struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Facts []struct{ Key, Value string }
			} `json:"structuredContent"`
		}
	}
	if err := json.Unmarshal([]byte(answer("2")), &res); err != nil {
		t.Fatal(err)
	}
	if got := res.Result.StructuredContent.Facts; res.Result.IsError || len(got) != facts || got[0].Value != value {
		t.Fatalf("list_facts read slowly: %d facts (error %v); want the %d set", len(got), res.Result.IsError, facts)
	}
	feed.Close()
	if err := <-done; err != nil {
		t.Fatalf("ServeIO with a client reading slowly: %v", err)
	}
}
