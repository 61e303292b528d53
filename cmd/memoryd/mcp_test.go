package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// mcpChildArgs carries the arguments of the memoryd process
// TestMCPStdioChild becomes, as a JSON array.
const mcpChildArgs = "MEMORYD_TEST_MCP_CHILD_ARGS"

// TestMCPStdioChild is no test of its own: run by TestMCPOverStdio as a
// child process (this test binary), it is `memoryd <args>` with the real
// stdin and stdout, and main's stop signals.
func TestMCPStdioChild(t *testing.T) {
	args := os.Getenv(mcpChildArgs)
	if args == "" {
		t.Skip("the child process of TestMCPOverStdio")
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals(signal.Ignored)...)
	code := run(ctx, &cli{stdout: os.Stdout, stderr: os.Stderr}, argv)
	stop()
	os.Exit(code)
}

// mcpCall calls a tool and decodes its structured result into out; a tool
// error fails the test.
func mcpCall(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, _ := json.Marshal(res.StructuredContent)
	if res.IsError {
		t.Fatalf("%s: tool error %+v", name, res.Content)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, data, err)
	}
}

// TestMCPOverStdio runs `memoryd mcp --user alice` as a child process, as
// an agent does, and talks to it with the SDK's CommandTransport: every
// tool is listed, and what the tools set, store and delete is alice's
// memory in the running service (read back with the NATS client), not
// bob's.
func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	nc, prefix, _ := startTestEnricher(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPStdioChild$")
	argv, _ := json.Marshal([]string{"mcp", "--user", "alice",
		"--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "20s", "--log-format", "json"})
	cmd.Env = append(os.Environ(), mcpChildArgs+"="+string(argv))
	stderr := new(eventstest.SyncBuffer)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to memoryd mcp: %v\n%s", err, stderr.String())
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("memoryd mcp did not end when its stdin closed: %v\n%s", err, stderr.String())
		}
	}()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{"clear_fact", "delete_memory", "get_fact", "list_facts", "list_memories", "search_memory", "set_fact", "store_memory"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	var f struct{ Key, Value string }
	mcpCall(t, s, "set_fact", map[string]any{"key": "employer", "value": "Acme"}, &f)
	memory := events.NewClient(nc, prefix)
	got, err := memory.GetFact(ctx, "alice", "employer")
	if err != nil || got.Value != "Acme" {
		t.Fatalf("alice's employer in memoryd after set_fact: %+v, %v", got, err)
	}
	if bobs, err := memory.ListFacts(ctx, "bob"); err != nil || len(bobs) != 0 {
		t.Fatalf("bob's facts: %+v, %v", bobs, err)
	}
	var stored struct{ ID int64 }
	mcpCall(t, s, "store_memory", map[string]any{"question": "Which editor do I use?", "answer": "Helix"}, &stored)
	var found struct {
		Results []struct{ ID int64 }
	}
	mcpCall(t, s, "search_memory", map[string]any{"query": "editor"}, &found)
	if len(found.Results) != 1 || found.Results[0].ID != stored.ID {
		t.Fatalf("search_memory after store_memory %d: %+v", stored.ID, found)
	}
	rr, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: agenttools.FactsURI})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"value":"Acme"`) {
		t.Fatalf("read %s: %v %+v", agenttools.FactsURI, err, rr)
	}
	var del struct{ Deleted bool }
	mcpCall(t, s, "delete_memory", map[string]any{"id": stored.ID}, &del)
	if _, err := memory.GetContext(ctx, "alice", stored.ID); err == nil {
		t.Fatalf("memory %d still in memoryd after delete_memory", stored.ID)
	}
}

// TestMCPStdioSIGTERMCutsTheCallInFlight runs `memoryd mcp --user alice`
// as a child process with a tool call waiting on a memoryd that never
// answers, and sends it SIGTERM with its stdin still open (the agent is
// still there): the call is answered with a tool error saying the server
// is stopping, the cut is logged, and the process exits 0. Before, it
// exited only once the call had run out its --timeout (here an hour; 30 s
// in a run with --timeout 30s), without answering it.
func TestMCPStdioSIGTERMCutsTheCallInFlight(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	held := make(chan struct{}, 16)
	if _, err := nc.Subscribe(events.NewClient(nc, prefix).Subject("facts.list", "alice"), func(*nats.Msg) { held <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMCPStdioChild$")
	argv, _ := json.Marshal([]string{"mcp", "--user", "alice",
		"--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "1h", "--log-format", "json"})
	cmd.Env = append(os.Environ(), mcpChildArgs+"="+string(argv))
	stderr := new(eventstest.SyncBuffer)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout := new(eventstest.SyncBuffer)
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	if _, err := stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatalf("the tool call did not reach memoryd\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("memoryd mcp after SIGTERM: %v; want exit status 0\n%s", waitErr, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("memoryd mcp still running a minute after SIGTERM: the call in flight held it (its --timeout is an hour)\n%s", stderr.String())
	}
	var answer string
	for l := range strings.Lines(stdout.String()) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			}
		}
		if json.Unmarshal([]byte(l), &m) == nil && string(m.ID) == "2" && m.Result.IsError && len(m.Result.Content) > 0 {
			answer = m.Result.Content[0].Text
		}
	}
	if !strings.Contains(answer, "stopping") {
		t.Errorf("the cut call's answer %q; want a tool error saying the server is stopping", answer)
	}
	if !strings.Contains(stderr.String(), `"msg":"mcp tool call cut by the stop","tool":"list_facts"`) {
		t.Errorf("the cut call was not logged:\n%s", stderr.String())
	}
}

// TestMCPOverHTTPCommand runs `memoryd mcp --listen` with a key made by
// apikeys (as `memoryd keys add` does): the SDK client with the key reaches
// its user's memory, a request without it is 401, and SIGINT (the context)
// stops the server cleanly.
func TestMCPOverHTTPCommand(t *testing.T) {
	t.Parallel()
	nc, prefix, _ := startTestEnricher(t)
	key, err := apikeys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := new(eventstest.SyncBuffer)
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, &cli{stdout: new(eventstest.SyncBuffer), stderr: stderr}, []string{"mcp", "--listen", "127.0.0.1:0",
			"--key-hashes", apikeys.Hash(key) + " carol", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"})
	}()
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	var url string
	if ok, state := eventstest.Poll(30*time.Second, func() (bool, string) {
		m := listening.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil, stderr.String()
	}); !ok {
		t.Fatalf("memoryd mcp --listen did not say where it listens: %s", state)
	}

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no bearer: status %d, want 401", resp.StatusCode)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + key}}
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect with the key: %v\n%s", err, stderr.String())
	}
	var f struct{ Key, Value string }
	mcpCall(t, s, "set_fact", map[string]any{"key": "favorite_animal", "value": "a hamster"}, &f)
	if got, err := events.NewClient(nc, prefix).GetFact(ctx, "carol", "favorite_animal"); err != nil || got.Value != "a hamster" {
		t.Fatalf("carol's favorite_animal after set_fact with carol's key: %+v, %v", got, err)
	}
	_ = s.Close()
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("memoryd mcp --listen exited %d after SIGINT\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("memoryd mcp --listen still running 30s after SIGINT")
	}
}

// headerTransport sets headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
