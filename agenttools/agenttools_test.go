package agenttools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// keys is a fixed key → user table (the command reads apikeys' file).
type keys map[string]string

func (k keys) Lookup(key string) (string, bool) {
	u, ok := k[key]
	return u, ok
}

// startEnricher runs the enrich service on its own schema and subject
// prefix until the test ends, and returns a client of it.
func startEnricher(t *testing.T) *events.Client {
	t.Helper()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: storetest.New(t), Prefix: prefix, Timeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	return events.NewClient(nc, prefix)
}

// startHTTP runs the enrich service (which answers every memory tool) on
// its own schema and subject prefix, and the MCP server's HTTP handler in
// front of it with two keys: "alice-key" and "bob-key".
func startHTTP(t *testing.T) string {
	t.Helper()
	return serveHTTP(t, startEnricher(t), keys{"alice-key": "alice", "bob-key": "bob"})
}

// serveHTTP runs the MCP server's HTTP handler for client with ks and
// returns its URL.
func serveHTTP(t *testing.T, client *events.Client, ks keys) string {
	t.Helper()
	return serveHTTPConfig(t, agenttools.Config{Client: client, Timeout: 10 * time.Second, Keys: ks, Logger: slog.New(slog.DiscardHandler)})
}

// serveHTTPConfig is serveHTTP of a server of cfg.
func serveHTTPConfig(t *testing.T, cfg agenttools.Config) string {
	t.Helper()
	srv, err := agenttools.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := srv.Handler()
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// connectHTTP opens an SDK client session to url with key.
func connectHTTP(t *testing.T, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}, MaxRetries: -1}
	s, err := client.Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

func mustConnect(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	s, err := connectHTTP(t, url, key)
	if err != nil {
		t.Fatalf("connect with %s: %v", key, err)
	}
	return s
}

// call calls a tool and decodes its structured result into out; a tool
// error fails the test.
func call(t *testing.T, s *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := callTool(s, name, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, shortArgs(args), err)
	}
	if res.IsError {
		t.Fatalf("%s(%v): tool error %s", name, shortArgs(args), text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: decode %s: %v", name, data, err)
	}
}

func callTool(s *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	// A hang's bound: a 2 MiB argument, parsed and checked against the
	// tool's schema under the race detector, took over 20 s at load 15-22
	// on 2 cores.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// toolError calls a tool that must fail as a tool (isError), not as a
// protocol error, and returns its message.
func toolError(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := callTool(s, name, args)
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v; want a tool error", name, shortArgs(args), err)
	}
	if !res.IsError {
		t.Fatalf("%s(%v) succeeded: %s; want a tool error", name, shortArgs(args), text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// shortArgs is args for a failure message: a string argument of a
// megabyte (the size limits' cases) printed whole buried the message.
func shortArgs(args map[string]any) map[string]any {
	short := make(map[string]any, len(args))
	for k, v := range args {
		if s, ok := v.(string); ok && len(s) > 100 {
			v = fmt.Sprintf("%.40s… (%d bytes)", s, len(s))
		}
		short[k] = v
	}
	return short
}

type fact struct{ Key, Value string }
type memory struct {
	ID       int64
	Question string
	Answer   string
	Score    float64
}

// TestToolsHaveSchemasAndNoUser lists the tools: each one the brief names,
// with a description and an object input schema; none takes a user, so no
// argument can choose whose memory a call reads or changes (the schemas
// also refuse unknown arguments).
func TestToolsHaveSchemasAndNoUser(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"clear_fact", "delete_memory", "get_fact", "list_facts", "list_memories", "search_memory", "set_fact", "store_memory"}
	var got []string
	required := map[string][]string{"search_memory": {"query"}, "get_fact": {"key"}, "set_fact": {"key", "value"},
		"clear_fact": {"key"}, "delete_memory": {"id"}}
	// What each tool does to memory, for the client deciding whether to ask
	// the user first: without annotations a tool is taken to be destructive.
	readOnly := map[string]bool{"search_memory": true, "get_fact": true, "list_facts": true, "list_memories": true}
	destructive := map[string]bool{"set_fact": true, "clear_fact": true, "delete_memory": true}
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
		switch a := tool.Annotations; {
		case a == nil:
			t.Errorf("%s: no annotations (taken to be destructive)", tool.Name)
		case a.ReadOnlyHint != readOnly[tool.Name]:
			t.Errorf("%s: readOnlyHint %v", tool.Name, a.ReadOnlyHint)
		case !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint != destructive[tool.Name] || !a.IdempotentHint):
			t.Errorf("%s: destructiveHint %v, idempotentHint %v", tool.Name, a.DestructiveHint, a.IdempotentHint)
		case a.OpenWorldHint == nil || *a.OpenWorldHint:
			t.Errorf("%s: open world (it works on memoryd's memory alone)", tool.Name)
		}
		if len(tool.Description) < 60 {
			t.Errorf("%s: description %q is too short to tell a model when to use it", tool.Name, tool.Description)
		}
		var schema struct {
			Type                 string
			Properties           map[string]map[string]any
			Required             []string
			AdditionalProperties any
		}
		data, _ := json.Marshal(tool.InputSchema)
		if err := json.Unmarshal(data, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s: input schema %s is not an object schema (%v)", tool.Name, data, err)
			continue
		}
		// What the model providers take (MCP walk): OpenAI refuses an
		// object schema without properties, a tool of no arguments
		// included; Gemini a type that is a list ("type": ["string",
		// "array"]), which clients pass on as they are.
		if schema.Properties == nil {
			t.Errorf("%s: input schema has no properties (OpenAI: object schema missing properties): %s", tool.Name, data)
		}
		if strings.Contains(string(data), `"type":[`) {
			t.Errorf("%s: input schema has a list of types (Gemini takes one): %s", tool.Name, data)
		}
		for name, p := range schema.Properties {
			if strings.Contains(strings.ToLower(name), "user") {
				t.Errorf("%s: argument %q names a user: %s", tool.Name, name, data)
			}
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s: argument %q has no description", tool.Name, name)
			}
		}
		if b, ok := schema.AdditionalProperties.(map[string]any); !ok || b["not"] == nil {
			if schema.AdditionalProperties != false {
				t.Errorf("%s: schema allows arguments it does not name: %s", tool.Name, data)
			}
		}
		slices.Sort(schema.Required)
		if w := required[tool.Name]; !slices.Equal(schema.Required, w) {
			t.Errorf("%s: required %v, want %v", tool.Name, schema.Required, w)
		}
		if tool.Name == "search_memory" && schema.Properties["limit"]["maximum"] != float64(events.MaxMaxResults) {
			t.Errorf("search_memory: limit has no maximum %d: %s", events.MaxMaxResults, data)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}
}

// TestToolsOverHTTP: facts set, get, list (and the facts resource), clear;
// a memory stored is found by search and listed, then deleted; memoryd's
// errors (a missing fact, a missing memory, a bad argument) come back as
// tool errors with a clear message.
func TestToolsOverHTTP(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")

	var f fact
	call(t, s, "set_fact", map[string]any{"key": "location", "value": "Lisbon"}, &f)
	if f.Key != "location" || f.Value != "Lisbon" {
		t.Fatalf("set_fact returned %+v", f)
	}
	f = fact{}
	call(t, s, "get_fact", map[string]any{"key": "location"}, &f)
	if f.Value != "Lisbon" {
		t.Fatalf("get_fact after set: %+v", f)
	}
	var facts struct{ Facts []fact }
	call(t, s, "list_facts", nil, &facts)
	if len(facts.Facts) != 1 || facts.Facts[0].Value != "Lisbon" {
		t.Fatalf("list_facts: %+v", facts)
	}
	rr, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: agenttools.FactsURI})
	if err != nil || len(rr.Contents) != 1 || !strings.Contains(rr.Contents[0].Text, `"value":"Lisbon"`) {
		t.Fatalf("read %s: %v %+v", agenttools.FactsURI, err, rr)
	}
	var cleared struct{ Deleted bool }
	call(t, s, "clear_fact", map[string]any{"key": "location"}, &cleared)
	if !cleared.Deleted {
		t.Fatal("clear_fact of a set fact: deleted false")
	}
	if msg := toolError(t, s, "get_fact", map[string]any{"key": "location"}); !strings.Contains(msg, "not found") {
		t.Errorf("get_fact of a cleared fact: %q, want not found", msg)
	}

	var stored struct {
		ID     int64
		Stored bool
	}
	call(t, s, "store_memory", map[string]any{"question": "What is my cat called?", "answer": "Miso, a grey tabby"}, &stored)
	if !stored.Stored || stored.ID == 0 {
		t.Fatalf("store_memory: %+v", stored)
	}
	var note struct{ ID int64 }
	call(t, s, "store_memory", map[string]any{"note": "prefers answers in metric units"}, &note)
	var found struct{ Results []memory }
	call(t, s, "search_memory", map[string]any{"query": "cat name"}, &found)
	if len(found.Results) == 0 || found.Results[0].ID != stored.ID || found.Results[0].Answer != "Miso, a grey tabby" {
		t.Fatalf("search_memory after store: %+v", found)
	}
	var page struct {
		Memories   []memory
		NextCursor string `json:"next_cursor"`
	}
	// Walk the pages one memory at a time: each memory once, then the end.
	var listed []int64
	for i := 0; i < 4; i++ {
		args := map[string]any{"limit": 1}
		if page.NextCursor != "" {
			args["cursor"] = page.NextCursor
		}
		page.Memories, page.NextCursor = nil, ""
		call(t, s, "list_memories", args, &page)
		for _, m := range page.Memories {
			listed = append(listed, m.ID)
		}
		if page.NextCursor == "" {
			break
		}
	}
	if !slices.Equal(listed, []int64{note.ID, stored.ID}) || page.NextCursor != "" {
		t.Fatalf("list_memories page by page: %v (next %q), want %v newest first", listed, page.NextCursor, []int64{note.ID, stored.ID})
	}
	var del struct{ Deleted bool }
	call(t, s, "delete_memory", map[string]any{"id": stored.ID}, &del)
	if !del.Deleted {
		t.Fatal("delete_memory: deleted false")
	}
	found.Results = nil
	call(t, s, "search_memory", map[string]any{"query": "cat name"}, &found)
	for _, m := range found.Results {
		if m.ID == stored.ID {
			t.Fatalf("search_memory still finds deleted memory %d", stored.ID)
		}
	}
	if msg := toolError(t, s, "delete_memory", map[string]any{"id": stored.ID}); !strings.Contains(msg, "not found") {
		t.Errorf("delete_memory twice: %q, want not found", msg)
	}
	if msg := toolError(t, s, "search_memory", map[string]any{"query": "x", "limit": 500}); !strings.Contains(msg, "limit") {
		t.Errorf("search_memory limit 500: %q, want a message naming limit", msg)
	}
	if msg := toolError(t, s, "store_memory", map[string]any{}); !strings.Contains(msg, "question") {
		t.Errorf("store_memory with nothing: %q", msg)
	}
	if msg := toolError(t, s, "list_memories", map[string]any{"cursor": "yesterday"}); !strings.Contains(msg, "cursor") {
		t.Errorf("list_memories with a made-up cursor: %q", msg)
	}
}

// TestFactsResourceWithMemorydDown: reading the facts resource while no
// memoryd answers is a JSON-RPC internal error (-32603) saying memory is
// unavailable; before, its code was 0.
func TestFactsResourceWithMemorydDown(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	s := mustConnect(t, serveHTTP(t, events.NewClient(nc, prefix), keys{"alice-key": "alice"}), "alice-key")
	_, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: agenttools.FactsURI})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInternalError || !strings.Contains(wire.Message, "memory is unavailable") {
		t.Fatalf("read %s with memoryd down: %#v, want a JSON-RPC error %d saying memory is unavailable", agenttools.FactsURI, err, jsonrpc.CodeInternalError)
	}
}

// TestHTTPNeedsAKnownBearer: no Authorization header or an unknown key is
// 401 before any MCP message is read, and the SDK client cannot connect.
func TestHTTPNeedsAKnownBearer(t *testing.T) {
	t.Parallel()
	url := startHTTP(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, auth := range []string{"", "Bearer mallory-key", "Basic YWxpY2U6eA==", "Bearer alice-key extra"} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	if _, err := connectHTTP(t, url, "mallory-key"); err == nil {
		t.Error("the SDK client connected with an unknown key")
	}
	// The probes need no key (an operator's walk: everything was 401, so
	// nothing could probe the server).
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (path == "/readyz" && !strings.Contains(string(body), `"nats":"ok"`)) {
			t.Errorf("GET %s: %d %s, want 200", path, resp.StatusCode, body)
		}
	}
}

// TestHTTP401HasAChallenge: every 401 carries a WWW-Authenticate
// challenge, as RFC 9110 requires of a 401 and the MCP spec's
// authorization section of servers: Bearer with agenttools.Realm, and
// error="invalid_token" (RFC 6750) only for a bearer token the keys do not
// know; the MCP SDK client's own parser reads it. Its body tells a person
// how to get a key. A request that passes
// has none. Before, the SDK's 401 had none (it writes one only with OAuth
// metadata, which API keys have none of).
func TestHTTP401HasAChallenge(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	url := serveHTTP(t, events.NewClient(nc, prefix), keys{"alice-key": "alice"})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, c := range []struct {
		auth, wantErr string
		status        int
	}{
		{"", "", http.StatusUnauthorized},
		{"Bearer mallory-key", "invalid_token", http.StatusUnauthorized},
		{"bearer mallory-key", "invalid_token", http.StatusUnauthorized},
		{"Basic YWxpY2U6eA==", "", http.StatusUnauthorized},
		{"Bearer alice-key extra", "", http.StatusUnauthorized},
		{"Bearer alice-key", "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			t.Cleanup(func() { endSession(url, "alice-key", sid) })
		}
		got := resp.Header.Values("WWW-Authenticate")
		if resp.StatusCode != c.status {
			t.Fatalf("Authorization %q: status %d, want %d", c.auth, resp.StatusCode, c.status)
		}
		if c.status != http.StatusUnauthorized {
			if len(got) != 0 {
				t.Errorf("Authorization %q: %d with WWW-Authenticate %q, want none", c.auth, resp.StatusCode, got)
			}
			continue
		}
		// The body says what to do, as the proxy's does (before: the SDK's
		// "no bearer token" and "unknown API key: invalid token").
		if !strings.Contains(string(body), "Authorization: Bearer <key>") || !strings.Contains(string(body), "memoryd keys add") {
			t.Errorf("Authorization %q: 401 body %q, want it to say to send a key made by memoryd keys add", c.auth, body)
		}
		challenges, err := oauthex.ParseWWWAuthenticate(got)
		if err != nil || len(challenges) != 1 || challenges[0].Scheme != "bearer" ||
			challenges[0].Params["realm"] != agenttools.Realm || challenges[0].Params["error"] != c.wantErr {
			t.Errorf("Authorization %q: WWW-Authenticate %q (%+v, %v), want Bearer realm=%q with error %q", c.auth, got, challenges, err, agenttools.Realm, c.wantErr)
		}
	}
}

// TestTokensSeeOnlyTheirUser: two keys are two users; what one sets the
// other does not see, an argument naming another user is refused, and a
// session id presented with the other user's key is refused.
func TestTokensSeeOnlyTheirUser(t *testing.T) {
	t.Parallel()
	url := startHTTP(t)
	alice, bob := mustConnect(t, url, "alice-key"), mustConnect(t, url, "bob-key")
	var f fact
	call(t, alice, "set_fact", map[string]any{"key": "name", "value": "Alice"}, &f)
	call(t, alice, "store_memory", map[string]any{"question": "favourite colour", "answer": "teal"}, &struct{}{})

	toolError(t, bob, "set_fact", map[string]any{"key": "name", "value": "Mallory", "user_id": "alice"})
	toolError(t, bob, "list_facts", map[string]any{"user": "alice"})

	var facts struct{ Facts []fact }
	call(t, bob, "list_facts", nil, &facts)
	if len(facts.Facts) != 0 {
		t.Errorf("bob sees facts %+v", facts.Facts)
	}
	var found struct{ Results []memory }
	call(t, bob, "search_memory", map[string]any{"query": "favourite colour"}, &found)
	if len(found.Results) != 0 {
		t.Errorf("bob finds %+v", found.Results)
	}
	call(t, alice, "get_fact", map[string]any{"key": "name"}, &f)
	if f.Value != "Alice" {
		t.Errorf("alice's name is now %q", f.Value)
	}
	call(t, alice, "search_memory", map[string]any{"query": "favourite colour"}, &found)
	if len(found.Results) != 1 {
		t.Errorf("alice finds %+v, want her one memory", found.Results)
	}

	// Bob's key on Alice's session: a call, her event stream, and ending
	// her session.
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}`)
		}
		req, _ := http.NewRequest(method, url, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer bob-key")
		req.Header.Set("Mcp-Session-Id", alice.ID())
		req.Header.Set("Mcp-Protocol-Version", alice.InitializeResult().ProtocolVersion)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("bob's key on alice's session %q, %s: status %d, want 403", alice.ID(), method, resp.StatusCode)
		}
	}
	// Her session lives on.
	call(t, alice, "get_fact", map[string]any{"key": "name"}, &f)
	if f.Value != "Alice" {
		t.Errorf("alice's name after bob's tries is %q", f.Value)
	}
}

// The lines that open a stdio session: initialize (id 1), then
// initialized.
const (
	stdioInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`
	stdioInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
)

// stdioServer is a server for alice's stdio sessions, in front of an
// enrich service of its own.
func stdioServer(t *testing.T) *agenttools.Server {
	t.Helper()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, User: "alice", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// serveScript runs one stdio session of srv on in, as a script piping its
// requests in, and returns what it wrote.
func serveScript(srv *agenttools.Server, in string) (string, error) {
	var out eventstest.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := srv.ServeIO(ctx, strings.NewReader(in), &out)
	return out.String(), err
}

// A client that writes its requests and closes its end at once (a script:
// printf '…' | memoryd mcp --user U) gets every answer: the session waits
// for them before it ends (before: it ended at the input's end, and of
// four requests 0 to 1 were answered).
func TestStdioAnswersEveryRequestBeforeItsInputEnds(t *testing.T) {
	t.Parallel()
	srv := stdioServer(t)
	in := strings.Join([]string{
		stdioInitialize, stdioInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"set_fact","arguments":{"key":"city","value":"Lisbon"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_facts","arguments":{}}}`,
	}, "\n") + "\n"
	for range 5 {
		out, err := serveScript(srv, in)
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
		ids := map[string]bool{}
		for line := range strings.Lines(out) {
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error *struct{ Message string }
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("output line %q: %v", line, err)
			}
			if m.Error != nil {
				t.Errorf("request %s answered an error: %s", m.ID, m.Error.Message)
			}
			ids[string(m.ID)] = true
		}
		for _, id := range []string{"1", "2", `"three"`, "4"} {
			if !ids[id] {
				t.Fatalf("request %s was not answered; output:\n%s", id, out)
			}
		}
	}
}

// TestStdioAnswersALineThatIsNoMessage: a line that is not JSON is
// answered with a parse error (-32700), one without "jsonrpc": "2.0" with
// an invalid request (-32600, with its id), and the session goes on: the
// requests before and after them are answered. Before, the SDK ended the
// session at the line, the process exited 1, and the answers still due
// were lost (MCP walk).
func TestStdioAnswersALineThatIsNoMessage(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		stdioInitialize, stdioInitialized,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"set_fact","arguments":{"key":"city","value":"Lisbon"}}}`,
		`garbage`,
		``,
		`{"id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_fact","arguments":{"key":"location"}}}`,
	}, "\n") // the last line without its newline
	out, err := serveScript(stdioServer(t), in)
	if err != nil {
		t.Fatalf("serve: %v; output:\n%s", err, out)
	}
	got := map[string]int{} // id → error code, 0 for a result
	for line := range strings.Lines(out) {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		code := 0
		if m.Error != nil {
			code = m.Error.Code
		}
		got[string(m.ID)] = code
	}
	want := map[string]int{"1": 0, "2": 0, "null": -32700, "3": -32600, "4": 0}
	if !maps.Equal(got, want) {
		t.Fatalf("answers by id (error code, 0 a result): %v, want %v; output:\n%s", got, want, out)
	}
}

// An agent's tool calls sent in parallel all succeed on an idle server:
// they wait for one another past memoryd's per-user bound (4 at once)
// instead of meeting it (before: of 12 pipelined list_facts calls, 4 to 7
// answered "memoryd is overloaded; retry later").
func TestParallelToolCallsQueue(t *testing.T) {
	t.Parallel()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), Timeout: 30 * time.Second, User: "alice", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	const calls = 32
	for i := range calls {
		tool := []string{`"list_facts","arguments":{}`, `"search_memory","arguments":{"query":"dog"}`, `"list_memories","arguments":{}`}[i%3]
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%s}}`, i, tool))
	}
	var out eventstest.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := srv.ServeIO(ctx, strings.NewReader(strings.Join(lines, "\n")+"\n"), &out); err != nil {
		t.Fatalf("serve: %v", err)
	}
	answered := 0
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Error  *struct{ Message string }
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Text string }
			}
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if string(m.ID) == `"init"` {
			continue
		}
		answered++
		if m.Error != nil || m.Result.IsError {
			t.Errorf("call %s failed: %+v %+v", m.ID, m.Error, m.Result.Content)
		}
	}
	if answered != calls {
		t.Fatalf("%d of %d calls answered", answered, calls)
	}
}

// TestFactsResourceIsPrivate: memoryd://facts holds one user's facts, so
// its read must not be marked cacheable by any client or intermediary
// (cacheScope "public", the protocol's default when a server sets none):
// over HTTP one URI serves every key's user, and a shared cache keyed by
// the URI would hand alice's facts to bob.
func TestFactsResourceIsPrivate(t *testing.T) {
	t.Parallel()
	url := startHTTP(t)
	s := mustConnect(t, url, "alice-key")
	var f fact
	call(t, s, "set_fact", map[string]any{"key": "location", "value": "Lisbon"}, &f)
	rr, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: agenttools.FactsURI})
	if err != nil {
		t.Fatal(err)
	}
	if rr.CacheScope != "private" {
		t.Errorf("read %s: cacheScope %q (ttlMs %d), want \"private\": the facts are the key's user's alone", agenttools.FactsURI, rr.CacheScope, rr.TTLMs)
	}
}

const longKey = "preferred_seat_when_travelling_by_long_distance_train_for_business_trips"

// TestToolErrorsNameTheToolsFields: a bad store_memory or set_fact is
// refused in the tool's own words (an audit found "question is required"
// for a blank note, and "use facts.clear", a NATS endpoint, for an empty
// value).
func TestToolErrorsNameTheToolsFields(t *testing.T) {
	t.Parallel()
	url := startHTTP(t)
	s := mustConnect(t, url, "alice-key")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"store_memory", map[string]any{"note": "   "}, "note is blank"},
		{"store_memory", map[string]any{"note": strings.Repeat("n", events.MaxQuestionBytes+1)}, fmt.Sprintf("note is %d bytes", events.MaxQuestionBytes+1)},
		{"store_memory", map[string]any{"answer": "a"}, "give question (with an answer or not), or note"},
		// The note is sent as the question: the service's refusal named
		// that (MCP walk).
		{"store_memory", map[string]any{"note": "a\x00b"}, "note contains a NUL character"},
		// Ids are those search_memory gives: 0 and 1e20 were refused in
		// the service's words and as a Go decoding error; now by the
		// tool's schema, as limits are.
		{"delete_memory", map[string]any{"id": 0}, "/properties/id: minimum"},
		{"delete_memory", map[string]any{"id": 1e20}, "/properties/id: maximum"},
		// 2^63 is float64(MaxInt64), the bound was: it passed the schema
		// and failed as "json: cannot unmarshal number ... into Go struct
		// field agenttools.deleteIn.id" (MCP walk).
		{"delete_memory", map[string]any{"id": json.Number("9223372036854775808")}, "/properties/id: maximum"},
		// The service's "no context item N": the tools call it a memory.
		{"delete_memory", map[string]any{"id": 987654321}, "not found: no memory with id 987654321"},
		{"store_memory", map[string]any{"note": "n", "question": "q"}, "give either note, or question (with an answer or not), not both"},
		{"set_fact", map[string]any{"key": "location", "value": " "}, "use clear_fact to delete a fact"},
		// A list key's value of separators alone: the service says "value
		// holds no item (use facts.clear ...)", its NATS endpoint.
		{"set_fact", map[string]any{"key": "languages", "value": ", ;"}, "use clear_fact to delete a fact"},
		// So is an array of no item: it said facts.clear, the service's
		// word.
		{"set_fact", map[string]any{"key": "languages", "value": []string{}}, "use clear_fact to delete a fact"},
		{"set_fact", map[string]any{"key": "languages", "value": []string{" ", ","}}, "use clear_fact to delete a fact"},
		// Over the NATS server's max payload (1 MiB): refused by the NATS
		// client before memoryd could name the field (before: "memoryd
		// search: nats: maximum payload exceeded").
		{"search_memory", map[string]any{"query": strings.Repeat("q", 2<<20)}, "invalid arguments: too large to send to memoryd"},
		{"set_fact", map[string]any{"key": "location", "value": strings.Repeat("v", 2<<20)}, "a fact value 8 KiB"},
		// A key whose snake_case form is over 64 bytes: cut, it was the
		// fact of any other long key with the same start (a walk: two
		// train-seat preferences were one fact).
		{"set_fact", map[string]any{"key": longKey, "value": "aisle"}, "use a shorter key"},
		{"get_fact", map[string]any{"key": longKey}, "use a shorter key"},
		{"clear_fact", map[string]any{"key": "Preferred Seat When Travelling By Long Distance Train For Business Trips"}, "use a shorter key"},
	} {
		if got := toolError(t, s, tc.tool, tc.args); !strings.Contains(got, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.tool, shortArgs(tc.args), got, tc.want)
		}
	}
	// A question alone is a memory, as the error says.
	var out struct {
		ID int64 `json:"id"`
	}
	call(t, s, "store_memory", map[string]any{"question": "I prefer window seats"}, &out)
	if out.ID == 0 {
		t.Fatal("a question without an answer was not stored")
	}
}

// TestSetFactTakesAnArray: a list key's items given as an array of
// strings, as a model sends what the description calls "a JSON array of
// strings", are the list's items; the schema
// said string, so the SDK refused the call (MCP walk). An array for a key
// of one value is refused, naming the list keys.
func TestSetFactTakesAnArray(t *testing.T) {
	t.Parallel()
	url := startHTTP(t)
	s := mustConnect(t, url, "alice-key")
	var got struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	call(t, s, "set_fact", map[string]any{"key": "languages", "value": []string{"Portuguese", "English"}}, &got)
	call(t, s, "get_fact", map[string]any{"key": "languages"}, &got)
	if got.Key != "languages" || !strings.Contains(got.Value, "Portuguese") || !strings.Contains(got.Value, "English") || strings.ContainsAny(got.Value, `["`) {
		t.Errorf("languages set as an array: %+v, want its two items", got)
	}
	if msg := toolError(t, s, "set_fact", map[string]any{"key": "location", "value": []string{"Lisbon"}}); !strings.Contains(msg, "an array is for a list key") || !strings.Contains(msg, "languages") {
		t.Errorf("location set as an array: %q, want a refusal naming the list keys", msg)
	}
	if msg := toolError(t, s, "set_fact", map[string]any{"key": "languages", "value": []any{"Portuguese", 3}}); msg == "" {
		t.Error("an array holding a number was taken")
	}
}

// TestToolCallWithNATSLostSaysSo: a call made while the NATS connection is
// lost says that, not that memoryd did not reply in time (MCP walk: an
// operator looked for a hung memoryd).
func TestToolCallWithNATSLostSaysSo(t *testing.T) {
	t.Parallel()
	srv := eventstest.StartServer(t, func(port int) []string { return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)} })
	nc := srv.Conn(t)
	url := serveHTTPConfig(t, agenttools.Config{Client: events.NewClient(nc, "memory"), Timeout: 300 * time.Millisecond,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(slog.DiscardHandler)})
	s := mustConnect(t, url, "alice-key")
	srv.Stop(t)
	eventstest.Eventually(t, "the client to see its server gone", 30*time.Second, func() (bool, string) {
		return !nc.IsConnected(), nc.Status().String()
	})
	if msg := toolError(t, s, "get_fact", map[string]any{"key": "name"}); !strings.Contains(msg, "connection to NATS is lost") {
		t.Errorf("get_fact with NATS down: %q, want it to say the NATS connection is lost", msg)
	}
}

// TestStdioAnswersAJSONLineThatIsNoMessage: a line of JSON that is no
// JSON-RPC message the SDK can read (a number, a string, null, an empty
// batch, an object without method or id, one with an id of the wrong type,
// one with trailing white space) is answered as invalid (-32600), and the
// session goes on. The line filter passed them on, and the SDK ended the
// session there, with the answers still due, as for a line not JSON.
func TestStdioAnswersAJSONLineThatIsNoMessage(t *testing.T) {
	t.Parallel()
	srv, err := agenttools.New(agenttools.Config{Client: startEnricher(t), Timeout: 10 * time.Second, User: "alice", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`42`,
		`"hello"`,
		`null`,
		`[]`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/list"}  `,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	}, "\n")
	var out eventstest.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err = srv.ServeIO(ctx, strings.NewReader(in), &out)
	cancel()
	if err != nil {
		t.Fatalf("serve: %v; output:\n%s", err, out.String())
	}
	results, invalid := map[string]bool{}, 0
	for line := range strings.Lines(out.String()) {
		var m struct {
			ID    json.RawMessage `json:"id"`
			Error *struct{ Code int }
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		switch {
		case m.Error == nil:
			results[string(m.ID)] = true
		case m.Error.Code == -32600:
			invalid++
		}
	}
	if !results["1"] || !results["2"] || !results["5"] || invalid != 6 {
		t.Fatalf("results %v and %d invalid requests, want results for 1, 5 and 2 and 6 invalid; output:\n%s", results, invalid, out.String())
	}
}

// TestNullArgumentIsAbsent: an argument sent as null is one not given, as
// a model sends an optional argument it does not use when its client made
// every argument required and nullable (OpenAI's strict mode) or unasked;
// the SDK refused the whole call ("has type \"null\", want \"string\"",
// MCP walk). A required argument sent as null is refused as missing.
func TestNullArgumentIsAbsent(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	var stored struct {
		ID int64 `json:"id"`
	}
	call(t, s, "store_memory", map[string]any{"question": nil, "answer": nil, "note": "the spare key is under the blue pot"}, &stored)
	var found struct {
		Results []memory `json:"results"`
	}
	call(t, s, "search_memory", map[string]any{"query": "spare key", "limit": nil, "scope": nil, "since": nil, "until": nil}, &found)
	if len(found.Results) != 1 || found.Results[0].ID != stored.ID {
		t.Errorf("search with null optional arguments: %+v, want memory %d", found.Results, stored.ID)
	}
	var facts struct {
		Facts []fact `json:"facts"`
	}
	call(t, s, "list_memories", map[string]any{"cursor": nil, "limit": nil, "scope": nil}, &facts)
	if msg := toolError(t, s, "set_fact", map[string]any{"key": "location", "value": nil}); !strings.Contains(msg, `missing properties: ["value"]`) {
		t.Errorf("set_fact with a null value: %q, want value named missing", msg)
	}
}

// TestNewRefusesAUserTheServiceRefuses: a stdio session's user holding
// U+FFFD, which every request of the service refuses (events: a JSON
// decoder's reading of invalid UTF-8 or a lone surrogate), is refused at
// start, as one over the length limit or invalid UTF-8 is.
func TestNewRefusesAUserTheServiceRefuses(t *testing.T) {
	client := events.NewClient(nil, "memory")
	for _, user := range []string{"x\uFFFD", "caf\xe9", strings.Repeat("u", events.MaxUserIDBytes+1)} {
		if _, err := agenttools.New(agenttools.Config{Client: client, User: user}); err == nil {
			t.Errorf("New with user %.20q: no error", user)
		}
	}
	if _, err := agenttools.New(agenttools.Config{Client: client, User: "alice"}); err != nil {
		t.Errorf("New with user alice: %v", err)
	}
}
