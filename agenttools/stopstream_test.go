package agenttools_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/events/eventstest"
)

// watchedStreams is a client transport that watches a session's event
// streams (its GETs): opened receives a value once the first has its
// response, ended once it ends (its body read to its end or failed); a
// GET after the first (a reconnect attempt) is counted in reconnects.
// early records whether the stream ended, or a reconnect was attempted,
// while cut was still false.
type watchedStreams struct {
	base       http.RoundTripper
	cut        *atomic.Bool
	opened     chan struct{}
	ended      chan struct{}
	gets       atomic.Int64
	reconnects atomic.Int64
	early      atomic.Bool
	endOnce    sync.Once
}

func newWatchedStreams(base http.RoundTripper, cut *atomic.Bool) *watchedStreams {
	return &watchedStreams{base: base, cut: cut, opened: make(chan struct{}), ended: make(chan struct{})}
}

func (w *watchedStreams) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		return w.base.RoundTrip(r)
	}
	if w.gets.Add(1) > 1 {
		w.reconnects.Add(1)
		if !w.cut.Load() {
			w.early.Store(true)
		}
		return w.base.RoundTrip(r)
	}
	resp, err := w.base.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	close(w.opened)
	resp.Body = &watchedBody{ReadCloser: resp.Body, end: func() {
		w.endOnce.Do(func() {
			if !w.cut.Load() {
				w.early.Store(true)
			}
			close(w.ended)
		})
	}}
	return resp, nil
}

type watchedBody struct {
	io.ReadCloser
	end func()
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

// TestStopKeepsTheEventStreamOfACallInFlight: Stop keeps the event stream
// of a session with a tool call in flight open until the call is cut, and
// the cut call's answer reaches the SDK's client; the stream of a session
// with no call in flight ends at once; a connection opened before the
// stop cannot open a session during it. Before, every session's stream
// ended as the stop began: the SDK's client retries it five times (about
// 13 s, against a listener already closed) and then fails its session,
// so with a stop deadline past that a call cut at the deadline got the
// client's error rather than the server's answer.
func TestStopKeepsTheEventStreamOfACallInFlight(t *testing.T) {
	t.Parallel()
	client, held := heldMemoryd(t)
	var logs eventstest.SyncBuffer
	srv, err := agenttools.New(agenttools.Config{Client: client, Keys: keys{"alice-key": "alice", "bob-key": "bob"},
		Listen: "127.0.0.1:0", Timeout: time.Hour, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var cut atomic.Bool
	// The SDK's client as an agent has it: its default retries.
	connect := func(key string) (*mcp.ClientSession, *watchedStreams) {
		w := newWatchedStreams(bearer{key, http.DefaultTransport}, &cut)
		s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr() + "/", HTTPClient: &http.Client{Transport: w}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		select {
		case <-w.opened:
		case <-time.After(time.Minute):
			t.Fatal("the SDK's client opened no event stream")
		}
		return s, w
	}
	busy, busyStream := connect("alice-key")
	_, idleStream := connect("bob-key")
	// A connection made before the stop, its request sent during it.
	late, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()

	callCtx, endCall := context.WithCancel(context.Background())
	defer endCall()
	called := listFactsAsync(callCtx, busy)
	waitHeld(t, held)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(ctx) }()
	// The idle session's stream ends without waiting for the call.
	select {
	case <-idleStream.ended:
	case <-time.After(time.Minute):
		t.Fatalf("the idle session's event stream still open a minute into the stop\n%s", logs.String())
	}
	req := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"late","version":"1"}}}`
	_, err = io.WriteString(late, "POST / HTTP/1.1\r\nHost: "+srv.Addr()+"\r\nAuthorization: Bearer alice-key\r\n"+
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Content-Length: "+strconv.Itoa(len(req))+"\r\n\r\n"+req)
	if err == nil {
		// Refused by closing the connection, or by an error status.
		if resp, err := http.ReadResponse(bufio.NewReader(late), nil); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				t.Errorf("a new session asked for during the stop: %s (session %q); want it refused", resp.Status, resp.Header.Get("Mcp-Session-Id"))
			}
		}
	}

	cut.Store(true)
	cancel()
	select {
	case err := <-stopped:
		if !errors.Is(err, agenttools.ErrCallsCut) {
			t.Fatalf("Stop past its deadline with a call in flight: %v; want ErrCallsCut", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Stop still running a minute after its deadline\n%s", logs.String())
	}
	a := awaitAnswer(called, endCall)
	if busyStream.early.Load() {
		t.Errorf("the event stream of the session with a call in flight ended (or was reconnected: %d attempts) before the call was cut", busyStream.reconnects.Load())
	}
	switch {
	case a.err != nil:
		t.Errorf("the cut call: %v; want a tool error saying the server is stopping", a.err)
	case !a.res.IsError || !strings.Contains(text(a.res), "stopping"):
		t.Errorf("the cut call's answer %q (error %v); want a tool error saying the server is stopping", text(a.res), a.res.IsError)
	}
}
