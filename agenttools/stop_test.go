package agenttools_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/events"
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

// heldMemoryd is a memoryd that receives alice's list_facts requests and
// never answers them (hung, or stuck on its database): it returns a client
// of it and a channel that receives a value as each request arrives.
func heldMemoryd(t *testing.T) (*events.Client, <-chan struct{}) {
	t.Helper()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	c := events.NewClient(nc, prefix)
	held := make(chan struct{}, 16)
	if _, err := nc.Subscribe(c.Subject("facts.list", "alice"), func(*nats.Msg) { held <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c, held
}

// waitHeld waits for the held memoryd to receive a request.
func waitHeld(t *testing.T, held <-chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the tool call did not reach memoryd")
	}
}

// TestStdioStopCutsTheCallInFlight: a stop (memoryd mcp's SIGTERM) while
// a tool call waits on memoryd cancels the call, answers it with a tool
// error saying so, logs it, and ServeIO returns nil. Before, the SDK's
// stop closed the session, which waited for the call to run out its
// Timeout (--timeout; here an hour) and then dropped its answer. A call
// cut while it waited its turn (MaxUserCalls) says nothing was asked of
// memoryd; the one sent, that a change may or may not have been made.
func TestStdioStopCutsTheCallInFlight(t *testing.T) {
	t.Parallel()
	client, held := heldMemoryd(t)
	var logs eventstest.SyncBuffer
	srv, err := agenttools.New(agenttools.Config{Client: client, User: "alice", Timeout: time.Hour, MaxUserCalls: 1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	in, feed := io.Pipe()
	defer feed.Close()
	outR, outW := io.Pipe()
	defer outR.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := srv.ServeIO(ctx, in, outW)
		outW.Close()
		done <- err
	}()
	lines := make(chan string, 8)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// The client keeps its end open: an agent that is still there.
	if _, err := feed.Write([]byte(stdioInitialize + "\n" + stdioInitialized + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, held)
	// A second call waits for alice's one slot.
	if _, err := feed.Write([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the second call waiting its turn", 30*time.Second, func() (bool, string) {
		n := agenttools.GateCalls(srv, "alice")
		return n == 2, fmt.Sprintf("%d calls hold or wait for alice's slot", n)
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeIO stopped by its caller: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("ServeIO still running a minute after its stop: the call in flight held it (its Timeout is an hour)\n%s", logs.String())
	}
	answers := map[string]string{}
	for l := range lines {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			}
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Result.IsError && len(m.Result.Content) > 0 {
			answers[string(m.ID)] = m.Result.Content[0].Text
		}
	}
	if a := answers["2"]; !strings.Contains(a, "stopping") || !strings.Contains(a, "may or may not have been made") {
		t.Errorf("the cut call's answer %q; want a tool error saying the server is stopping and the change may or may not have been made", a)
	}
	if a := answers["3"]; !strings.Contains(a, "stopping") || !strings.Contains(a, "nothing was asked of memoryd") {
		t.Errorf("the waiting call's answer %q; want a tool error saying the server is stopping and nothing was asked of memoryd", a)
	}
	if !strings.Contains(logs.String(), `"msg":"mcp tool call cut by the stop","tool":"list_facts"`) {
		t.Errorf("the cut call was not logged:\n%s", logs.String())
	}
}

// TestStopCutsTheCallInFlight: Stop past its deadline cancels a tool call
// still waiting on memoryd, answers it with a tool error saying the server
// is stopping, logs it and returns ErrCallsCut. Before, it cut the call's
// connection, but the call ran on in its session, and closing the sessions
// waited for it to run out its Timeout: memoryd mcp --listen exited
// --timeout after SIGTERM, not --shutdown-timeout. Then the cut call got
// no answer at all, its connection closed under it (as stdio's did not).
func TestStopCutsTheCallInFlight(t *testing.T) {
	t.Parallel()
	client, held := heldMemoryd(t)
	var logs eventstest.SyncBuffer
	srv, err := agenttools.New(agenttools.Config{Client: client, Keys: keys{"alice-key": "alice"},
		Listen: "127.0.0.1:0", Timeout: time.Hour, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The SDK's client as an agent has it (its retries).
	s, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: "http://" + srv.Addr() + "/", HTTPClient: &http.Client{Transport: bearer{"alice-key", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	callCtx, endCall := context.WithCancel(context.Background())
	defer endCall()
	called := listFactsAsync(callCtx, s)
	waitHeld(t, held)

	// Its deadline already past: Stop cuts the call at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Stop(ctx) }()
	select {
	case err := <-stopped:
		if !errors.Is(err, agenttools.ErrCallsCut) {
			t.Fatalf("Stop past its deadline with a call in flight: %v; want ErrCallsCut", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("Stop still running a minute after its deadline: the call in flight held it (its Timeout is an hour)\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"mcp tool call cut by the stop","tool":"list_facts"`) {
		t.Errorf("the cut call was not logged:\n%s", logs.String())
	}
	a := awaitAnswer(called, endCall)
	switch {
	case a.err != nil:
		t.Errorf("the cut call: %v; want a tool error saying the server is stopping", a.err)
	case !a.res.IsError || !strings.Contains(text(a.res), "stopping") || !strings.Contains(text(a.res), "may or may not have been made"):
		t.Errorf("the cut call's answer %q (error %v); want a tool error saying the server is stopping and the change may or may not have been made", text(a.res), a.res.IsError)
	}
}

// answer is a tool call's result.
type answer struct {
	res *mcp.CallToolResult
	err error
}

// listFactsAsync calls list_facts through s in a goroutine of its own; the
// channel returned gets its answer.
func listFactsAsync(ctx context.Context, s *mcp.ClientSession) <-chan answer {
	called := make(chan answer, 1)
	go func() {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "list_facts", Arguments: map[string]any{}})
		called <- answer{res, err}
	}()
	return called
}

// awaitAnswer is the answer listFactsAsync's call gets, waited for up to a
// minute before the call is cancelled (endCall) and its error taken.
func awaitAnswer(called <-chan answer, endCall func()) answer {
	select {
	case a := <-called:
		return a
	case <-time.After(time.Minute):
		endCall()
		return <-called
	}
}
