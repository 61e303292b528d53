package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/apikeys"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
	"github.com/memoryd/memoryd/proxy"
	"github.com/memoryd/memoryd/store/storetest"
)

const (
	upstreamKey = "upstream-secret"
	replyText   = "Noted, I will remember that."
)

// upstream is a fake OpenAI-compatible chat server: it records each request
// and answers with replyText, streamed in chunks when asked to.
type upstream struct {
	srv *httptest.Server
	// mode: "" answers, "404" answers an unknown path's 404, "500" fails, "401" refuses the key, "hang" never
	// answers, "close" closes the connection unanswered, "cut" breaks a stream off, "stall" stops sending after a
	// stream's first chunk, "slow" streams its words 100 ms apart,
	// "linger" holds a stream's body open after its [DONE], "errorevent"
	// sends an SSE "event: error" after the finish reason; a mode of
	// reasoningReplies answers with that reply instead of replyText, one
	// of cutReplies with that reply and the finish reason "length".
	mu       sync.Mutex
	mode     string
	requests [][]byte
	auth     []string
	gateway  []string // X-Gateway-User as received
	parents  []string // traceparent as received
	headers  []http.Header
	queries  []string // the requests' raw queries
	// sent is the last streamed body, byte for byte.
	sent []byte
	// stallEnded counts the "stall" requests that ended (cancelled).
	stallEnded int
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) URL() string { return u.srv.URL + "/v1" }

func (u *upstream) setMode(m string) { u.mu.Lock(); u.mode = m; u.mu.Unlock() }

func (u *upstream) last(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.requests) == 0 {
		t.Fatal("the upstream got no request")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(u.requests[len(u.requests)-1], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	mode := u.mode
	u.queries = append(u.queries, r.URL.RawQuery)
	u.mu.Unlock()
	if r.URL.Path != "/v1/models" && r.URL.Path != "/v1/chat/completions" && !strings.HasPrefix(r.URL.Path, "/v1/models/") || strings.Contains(r.URL.Path, "..") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"reached":%q,"auth":%q}`, r.URL.Path, r.Header.Get("Authorization"))
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/models/") {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"model"}`, strings.TrimPrefix(r.URL.Path, "/v1/models/"))
		return
	}
	if r.URL.Path == "/v1/models" {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model","created":1,"owned_by":"test"}]}`)
		return
	}
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.requests = append(u.requests, body)
	u.auth = append(u.auth, r.Header.Get("Authorization"))
	u.gateway = append(u.gateway, r.Header.Get("X-Gateway-User"))
	u.parents = append(u.parents, r.Header.Get("traceparent"))
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	switch mode {
	case "401":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided: upstr***cret.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
		return
	case "404":
		// An upstream URL without its /v1: Ollama's (Go's) answer to an
		// unknown path.
		http.NotFound(w, r)
		return
	case "500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"model crashed","type":"server_error","param":null,"code":"boom"}}`)
		return
	case "hang":
		<-r.Context().Done()
		return
	case "close":
		// The connection taken and closed unanswered (a crash, a
		// gateway's limit).
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	case "stall":
		// A stream that sends its first chunk, then nothing, holding the
		// connection open until the request is cancelled.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		u.mu.Lock()
		u.stallEnded++
		u.mu.Unlock()
		return
	case "cut":
		// A streamed reply that breaks off: no finish reason, no [DONE],
		// no end of the chunked body.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "endearly":
		// A streamed reply whose body ends cleanly after its first chunk,
		// with no finish reason and no [DONE]: what a close-delimited
		// (HTTP/1.0-style) body cut by a dropped connection looks like, or
		// a server that gives up mid-generation and just ends the response.
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":null}]}\n\n")
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	id := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano())
	text, finish := replyText, "stop"
	if r, ok := reasoningReplies[mode]; ok {
		text = r
	}
	if r, ok := cutReplies[mode]; ok {
		text, finish = r, "length"
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","created":1,"model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":%q}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`, id, text, finish)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	var sent bytes.Buffer
	write := func(s string) {
		sent.WriteString(s)
		_, _ = io.WriteString(w, s)
		w.(http.Flusher).Flush()
	}
	write(fmt.Sprintf("data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n", id))
	for _, word := range strings.SplitAfter(text, " ") {
		write(fmt.Sprintf("data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", id, word))
		if mode == "slow" {
			// A model that thinks between words, as real ones do: the
			// pace is what the test is about, not a synchronisation.
			time.Sleep(100 * time.Millisecond)
		}
	}
	write(fmt.Sprintf("data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":%q}],\"usage\":{\"prompt_tokens\":11,\"completion_tokens\":7,\"total_tokens\":18}}\n\n", id, finish))
	if mode == "errorevent" {
		// An SSE error event whose data has no "error" member: the
		// OpenAI Node SDK throws on the event's name alone.
		write("event: error\ndata: {\"message\":\"overloaded\",\"type\":\"server_error\"}\n\n")
	}
	write("data: [DONE]\n\n")
	u.mu.Lock()
	u.sent = sent.Bytes()
	u.mu.Unlock()
	if mode == "linger" {
		// A body that does not end with [DONE] at once (the end of the
		// chunked body, or HTTP/2's END_STREAM, comes in a later packet):
		// held open until the request is cancelled.
		<-r.Context().Done()
	}
}

// env is a real memoryd (in-process app on an isolated schema, prefix and
// stream), a fake upstream and a proxy in front of it.
type env struct {
	app      *app.App
	nc       *nats.Conn
	prefix   string
	stream   string
	up       *upstream
	proxy    *proxy.Proxy
	url      string
	keys     map[string]string // user → key
	memory   *events.Client
	stopOnce sync.Once
}

func newEnv(t testing.TB, mod func(*proxy.Config)) *env {
	t.Helper()
	// A migrated schema of the pool (the app's start finds nothing to
	// migrate): a fresh one cost Postgres about 0.7 s of CPU a test, most
	// of this package's.
	dbURL := storetest.Migrated(t) + fmt.Sprintf("&pool_max_conns=%d", storetest.MaxConns)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	cfg := app.Defaults()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.NATS.URL, cfg.Store.URL, cfg.Prefix, cfg.Stream = eventstest.URL(), dbURL, prefix, stream
	cfg.Worker.Workers, cfg.Worker.JobTimeout, cfg.Enricher.Timeout = 2, time.Minute, 5*time.Second
	cfg.EnrichPool.MaxConns, cfg.EnrichPool.MinConns = 2, 1
	a, err := app.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })

	e := &env{app: a, nc: nc, prefix: prefix, stream: stream, up: newUpstream(t), keys: map[string]string{}}
	var lines []string
	for _, user := range []string{"alice", "bob"} {
		key, err := apikeys.Generate()
		if err != nil {
			t.Fatal(err)
		}
		e.keys[user] = key
		lines = append(lines, apikeys.Hash(key)+" "+user)
	}
	keys, err := apikeys.New(apikeys.Config{Text: strings.Join(lines, ";")})
	if err != nil {
		t.Fatal(err)
	}
	pc := proxy.Config{
		Upstream: e.up.URL(), UpstreamKey: upstreamKey, Listen: "127.0.0.1:0", Keys: keys,
		Conn: nc, Prefix: prefix, EnrichBudget: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&pc)
	}
	if e.proxy, err = proxy.New(pc); err != nil {
		t.Fatal(err)
	}
	if err := e.proxy.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.stop)
	e.url = "http://" + e.proxy.Addr() + "/v1"
	e.memory = events.NewClient(nc, prefix)
	return e
}

// stop stops the proxy, waiting for the turns it is publishing.
func (e *env) stop() {
	e.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.proxy.Stop(ctx)
	})
}

func (e *env) client(user string) *openai.Client {
	c := openai.DefaultConfig(e.keys[user])
	c.BaseURL = e.url
	return openai.NewClientWithConfig(c)
}

// turnStream is the env's turn stream.
func (e *env) turnStream(t *testing.T) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), e.stream)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nthTurn waits until n turns of user are on the stream and returns the
// last of them.
func (e *env) nthTurn(t *testing.T, user string, n uint64) events.Turn {
	t.Helper()
	eventstest.Eventually(t, "the turn published", time.Minute, func() (bool, string) {
		got := e.turnsPublished(t, user)
		return got == n, fmt.Sprintf("%d turns", got)
	})
	msg, err := e.turnStream(t).GetLastMsgForSubject(context.Background(), events.TurnSubject(e.prefix, user))
	if err != nil {
		t.Fatal(err)
	}
	var turn events.Turn
	if err := json.Unmarshal(msg.Data, &turn); err != nil {
		t.Fatal(err)
	}
	return turn
}

// turnsPublished is the number of turns on the stream for user.
func (e *env) turnsPublished(t *testing.T, user string) uint64 {
	t.Helper()
	s := e.turnStream(t)
	subj := events.TurnSubject(e.prefix, user)
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subj]
}

// setFact sets a fact once the service answers (it starts its endpoints
// in the background).
func (e *env) setFact(t *testing.T, user, key, value string) {
	t.Helper()
	eventstest.Eventually(t, "facts.set to succeed", time.Minute, func() (bool, string) {
		_, err := e.memory.SetFact(context.Background(), user, key, value)
		return err == nil, fmt.Sprint(err)
	})
}

func (e *env) waitProcessed(t *testing.T, user string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.app.WaitProcessed(ctx, user, n, nil); err != nil {
		t.Fatalf("waiting for %d turns of %s: %v", n, user, err)
	}
}

// post sends a chat completion asking "where do I live?" with the headers
// given as name, value pairs (an empty value is not sent), and returns the
// status after reading the body.
func (e *env) post(t *testing.T, headers ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"where do I live?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Add(headers[i], headers[i+1]) // a name given twice is sent twice
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// chat posts a chat completion request with body as alice, with the extra
// headers, reads the whole reply and fails the test unless it is a 200.
func (e *env) chat(t *testing.T, body string, header http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
}

// lastUserContent is the content of the last message of the upstream's last
// request, as raw JSON.
func lastMessage(t *testing.T, req map[string]json.RawMessage) (all []json.RawMessage, last map[string]json.RawMessage) {
	t.Helper()
	if err := json.Unmarshal(req["messages"], &all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(all[len(all)-1], &last); err != nil {
		t.Fatal(err)
	}
	return all, last
}

// TestRemembersAndRecalls: a streamed conversation through go-openai
// reaches the client byte for byte and lands in memory through the real
// pipeline; a second conversation's last user message reaches the upstream
// enriched with it, the earlier messages and unknown fields as sent, and the
// upstream sees its own key, never the client's.
func TestRemembersAndRecalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()

	// Conversation 1, streamed, raw HTTP: the client's bytes are the upstream's.
	body := `{"model":"fake-model","stream":true,"messages":[{"role":"user","content":"I live in Lisbon"}]}`
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s, %v", resp.Status, err)
	}
	e.up.mu.Lock()
	sent := e.up.sent
	auth := e.up.auth[0]
	e.up.mu.Unlock()
	if !bytes.Equal(got, sent) {
		t.Fatalf("the client got\n%q\nthe upstream sent\n%q", got, sent)
	}
	if auth != "Bearer "+upstreamKey {
		t.Fatalf("the upstream got Authorization %q, want its own key", auth)
	}
	e.waitProcessed(t, "alice", 1)

	// Conversation 2 through go-openai, not streamed.
	c := e.client("alice")
	cr, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: "fake-model",
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "You are terse."},
			{Role: "user", Content: "hello"},
			{Role: "assistant", Content: "hi"},
			{Role: "user", Content: "where do I live?"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Choices[0].Message.Content != replyText || cr.Usage.TotalTokens != 18 {
		t.Fatalf("reply %+v", cr)
	}
	msgs, last := lastMessage(t, e.up.last(t))
	var content string
	if err := json.Unmarshal(last["content"], &content); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(content, "where do I live?\n\n") || !strings.Contains(content, events.FactsMarker) || !strings.Contains(content, "Lisbon") {
		t.Fatalf("the upstream got the last user message %q, want it enriched with Lisbon", content)
	}
	for i, want := range []string{"You are terse.", "hello", "hi"} {
		var m struct{ Content string }
		if err := json.Unmarshal(msgs[i], &m); err != nil || m.Content != want {
			t.Fatalf("message %d reached the upstream as %s, want the client's %q", i, msgs[i], want)
		}
	}
	// Both turns published, each without the injection.
	e.waitProcessed(t, "alice", 2)
	list, err := e.memory.Search(ctx, events.SearchRequest{UserID: "alice", Query: "where do I live"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Results {
		if strings.Contains(it.Question, events.FactsMarker) {
			t.Fatalf("a stored item holds the injection: %+v", it)
		}
	}
}

// TestPartsAndUnknownFields: array-of-parts content gets the injection as
// one more text part; fields the proxy does not know reach the upstream;
// "memory" is memoryd's and does not.
func TestPartsAndUnknownFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.setFact(t, "alice", "location", "Porto")
	body := `{"model":"fake-model","x_custom":{"a":[1,2]},"memory":true,"messages":[{"role":"user","name":"al","content":[{"type":"text","text":"where do I live?"},{"type":"image_url","image_url":{"url":"data:,"}}]}]}`
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	up := e.up.last(t)
	if string(up["x_custom"]) != `{"a":[1,2]}` {
		t.Errorf("x_custom reached the upstream as %s", up["x_custom"])
	}
	if _, ok := up["memory"]; ok {
		t.Error(`"memory" was forwarded`)
	}
	_, last := lastMessage(t, up)
	if string(last["name"]) != `"al"` {
		t.Errorf("the message's name reached the upstream as %s", last["name"])
	}
	var parts []map[string]any
	if err := json.Unmarshal(last["content"], &parts); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || parts[0]["text"] != "where do I live?" || parts[1]["type"] != "image_url" ||
		parts[2]["type"] != "text" || !strings.Contains(fmt.Sprint(parts[2]["text"]), "location=Porto") {
		t.Fatalf("parts reached the upstream as %v", parts)
	}
}

// TestAuth: a missing or unknown key is a 401 in OpenAI's error shape, for
// chat and models, with the WWW-Authenticate challenge RFC 9110 requires
// of a 401 (before, none): Bearer with proxy.Realm, and
// error="invalid_token" (RFC 6750) when a bearer token was sent; nothing
// reaches the upstream.
func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, key := range []string{"", "mk-unknown", upstreamKey, apikeys.Hash(e.keys["alice"])} {
		for _, path := range []string{"/chat/completions", "/models"} {
			method := http.MethodPost
			if path == "/models" {
				method = http.MethodGet
			}
			req, _ := http.NewRequest(method, e.url+path, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Error struct{ Message, Type, Code string }
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			err = json.Unmarshal(raw, &body)
			if resp.StatusCode != http.StatusUnauthorized || err != nil || body.Error.Code != "invalid_api_key" || body.Error.Message == "" {
				t.Errorf("key %q %s: %s %+v %v", key, path, resp.Status, body, err)
			}
			challenge := `Bearer realm="` + proxy.Realm + `"`
			if key != "" {
				challenge += `, error="invalid_token"`
			}
			if got := resp.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != challenge {
				t.Errorf("key %q %s: WWW-Authenticate %q, want %q", key, path, got, challenge)
			}
			// Read by people with curl: `<key>`, not `\u003ckey\u003e`.
			if !bytes.Contains(raw, []byte("Bearer <key>")) {
				t.Errorf("key %q %s: body %s does not show 'Bearer <key>' as written", key, path, raw)
			}
		}
	}
	// go-openai sees an APIError with the status.
	c := openai.DefaultConfig("mk-wrong")
	c.BaseURL = e.url
	_, err := openai.NewClientWithConfig(c).ListModels(context.Background())
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusUnauthorized {
		t.Errorf("go-openai with a wrong key: %v", err)
	}
	e.up.mu.Lock()
	n := len(e.up.requests)
	e.up.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests reached the upstream without a valid key", n)
	}
	// A valid key lists the upstream's models, with no challenge.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/models", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Values("WWW-Authenticate"); resp.StatusCode != http.StatusOK || len(got) != 0 {
		t.Errorf("models with a valid key: %s, WWW-Authenticate %q; want 200 without one", resp.Status, got)
	}
	models, err := e.client("alice").ListModels(context.Background())
	if err != nil || len(models.Models) != 1 || models.Models[0].ID != "fake-model" {
		t.Fatalf("models: %+v, %v", models, err)
	}
}

// TestBodyUserIsNotIdentity: alice's key with "user": "bob" in the body
// reads alice's memory and remembers the turn as alice's.
func TestBodyUserIsNotIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	e.setFact(t, "bob", "location", "Berlin")
	_, err := e.client("alice").CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Model: "fake-model", User: "bob",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "I live in Madrid, where does bob live?"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, last := lastMessage(t, e.up.last(t))
	if strings.Contains(string(last["content"]), "Berlin") {
		t.Fatalf("alice's request was enriched with bob's memory: %s", last["content"])
	}
	e.stop() // waits for the publish
	if a, b := e.turnsPublished(t, "alice"), e.turnsPublished(t, "bob"); a != 1 || b != 0 {
		t.Fatalf("turns published: alice %d, bob %d; want 1, 0", a, b)
	}
}

// TestMemoryOff: the X-Memory header and the body field each opt a request
// out of enrich and of remembering; a request without them is remembered.
func TestMemoryOff(t *testing.T) {
	t.Parallel()
	obs := &outcomes{}
	e := newEnv(t, func(c *proxy.Config) { c.Observer = obs })
	e.setFact(t, "alice", "location", "Rome")
	send := func(body string, header bool) map[string]json.RawMessage {
		t.Helper()
		h := http.Header{}
		if header {
			h.Set("X-Memory", "off")
		}
		e.chat(t, body, h)
		return e.up.last(t)
	}
	for _, tc := range []struct {
		body   string
		header bool
	}{
		{`{"model":"m","memory":false,"messages":[{"role":"user","content":"where do I live?"}]}`, false},
		{`{"model":"m","stream":true,"memory":false,"messages":[{"role":"user","content":"where do I live?"}]}`, false},
		{`{"model":"m","messages":[{"role":"user","content":"where do I live?"}]}`, true},
	} {
		up := send(tc.body, tc.header)
		if _, ok := up["memory"]; ok {
			t.Error(`"memory" was forwarded`)
		}
		if _, last := lastMessage(t, up); strings.Contains(string(last["content"]), "Rome") {
			t.Errorf("%s (header %v): enriched although memory is off: %s", tc.body, tc.header, last["content"])
		}
	}
	// memory null is memory absent, on (before: off).
	for _, body := range []string{
		`{"model":"m","messages":[{"role":"user","content":"where do I live?"}]}`,
		`{"model":"m","memory":null,"messages":[{"role":"user","content":"where do I live?"}]}`,
	} {
		up := send(body, false)
		if _, last := lastMessage(t, up); !strings.Contains(string(last["content"]), "Rome") {
			t.Fatalf("%s: with memory on the request was not enriched: %s", body, last["content"])
		}
		if _, ok := up["memory"]; ok {
			t.Errorf(`%s: "memory" was forwarded`, body)
		}
	}
	// A message of white space only is no turn; a NUL in one is a space
	// in its turn (before, the publish refused the turn).
	send(`{"model":"m","messages":[{"role":"user","content":" \n\t "}]}`, false)
	send(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":" "}]}]}`, false)
	send(`{"model":"m","messages":[{"role":"user","content":"my id is a\u0000b"}]}`, false)
	// NULs alone are white space too; a message whose last 64 KiB (what a
	// turn keeps) are white space keeps its words. Before, both were
	// published blank, refused and counted failed.
	send(`{"model":"m","messages":[{"role":"user","content":"\u0000 \u0000"}]}`, false)
	send(`{"model":"m","messages":[{"role":"user","content":"I live in Oslo`+strings.Repeat(" ", events.MaxUserMessageBytes+10)+`"}]}`, false)
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 4 {
		t.Fatalf("%d turns published, want 4 (the requests with memory on and a message)", n)
	}
	// Before, the blank message was published, refused, and counted a
	// failed publish: the alert of turns memoryd will not remember.
	if n := obs.count("publish", "failed"); n != 0 {
		t.Errorf("%d publishes counted failed, want 0", n)
	}
}

// TestUpstreamFailures: an upstream error passes through unchanged (status
// and body), an upstream closing the connection unanswered is a 502 saying
// so, and neither is remembered.
func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.up.setMode("500")
	resp, body := postChat(t, e)
	if resp.StatusCode != http.StatusInternalServerError || string(body) != `{"error":{"message":"model crashed","type":"server_error","param":null,"code":"boom"}}` {
		t.Fatalf("upstream 500 reached the client as %s %s", resp.Status, body)
	}
	_, err := e.client("alice").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "model crashed" {
		t.Fatalf("go-openai saw %v", err)
	}
	// A server that took the connection and closed it was reached: said
	// so (before: "could not be reached").
	e.up.setMode("close")
	resp, body = postChat(t, e)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "closed the connection without answering") {
		t.Fatalf("an upstream closing the connection reached the client as %s %s", resp.Status, body)
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for failed requests, want 0", n)
	}
}

// TestHungUpstreamIs504: a hung upstream is a 504, logged, and not
// remembered. Its own test: the short UpstreamTimeout it needs also bounded
// the 500 of TestUpstreamFailures, which a loaded machine can take longer
// than 300 ms to answer (a 504 then).
func TestHungUpstreamIs504(t *testing.T) {
	t.Parallel()
	logs := &eventstest.SyncBuffer{}
	e := newEnv(t, func(c *proxy.Config) {
		c.UpstreamTimeout, c.Logger = 300*time.Millisecond, slog.New(slog.NewTextHandler(logs, nil))
	})
	e.up.setMode("hang")
	resp, body := postChat(t, e)
	if resp.StatusCode != http.StatusGatewayTimeout || !strings.Contains(string(body), "upstream_timeout") {
		t.Fatalf("hung upstream reached the client as %s %s", resp.Status, body)
	}
	// Logged (before: no line for a 504).
	if !strings.Contains(logs.String(), "upstream did not answer in time (504)") {
		t.Errorf("a 504 was not logged: %q", logs.String())
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for failed requests, want 0", n)
	}
}

// postChat posts a chat request of alice's and returns the answer and its
// body.
func postChat(t *testing.T, e *env) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"I live in Oslo"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestEnrichUnavailable: with no memoryd answering enrich (another
// prefix), the request is forwarded unenriched and answered: memory never
// breaks chat.
func TestEnrichUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) {
		c.Prefix = c.Prefix + "x" // nothing serves it
		c.EnrichBudget, c.PublishAttempts, c.PublishTimeout = 200*time.Millisecond, 1, 200*time.Millisecond
	})
	cr, err := e.client("alice").CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: "m", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "where do I live?"}}})
	if err != nil || cr.Choices[0].Message.Content != replyText {
		t.Fatalf("reply %+v, %v", cr, err)
	}
	if _, last := lastMessage(t, e.up.last(t)); string(last["content"]) != `"where do I live?"` {
		t.Fatalf("the upstream got %s, want the message unenriched", last["content"])
	}
}

// TestTrustedUserHeader: when configured, the gateway's header is the user
// (without a key) and is not forwarded; without it a key is still needed.
func TestTrustedUserHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.TrustedUserHeader = "X-Gateway-User" })
	e.setFact(t, "carol", "location", "Quito")
	post := func(user string) int {
		t.Helper()
		return e.post(t, "X-Gateway-User", user)
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Fatalf("no header, no key: %d", code)
	}
	if code := post("carol"); code != http.StatusOK {
		t.Fatalf("header carol: %d", code)
	}
	if _, last := lastMessage(t, e.up.last(t)); !strings.Contains(string(last["content"]), "Quito") {
		t.Fatalf("carol's request was not enriched with carol's memory: %s", last["content"])
	}
	// A user id memoryd would refuse is a 400 before the upstream is asked
	// (before: a chat without memory, and a turn that failed to publish).
	for _, bad := range []string{strings.Repeat("z", events.MaxUserIDBytes+1), "caf\xe9"} {
		if code := post(bad); code != http.StatusBadRequest {
			t.Errorf("header user id %q: %d, want 400", bad, code)
		}
	}
	// The header twice (a gateway that adds its own to the client's) is a
	// 400: before, the first, the client's, was the user.
	if code := e.post(t, "X-Gateway-User", "bob", "X-Gateway-User", "carol"); code != http.StatusBadRequest {
		t.Errorf("the header twice: %d, want 400", code)
	}
	if code := e.post(t, "X-Gateway-User", "bob, carol"); code != http.StatusBadRequest {
		t.Errorf("the header's two values joined: %d, want 400", code)
	}
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	if len(e.up.auth) != 1 || e.up.auth[0] != "Bearer "+upstreamKey || e.up.gateway[0] != "" {
		t.Fatalf("upstream Authorization %q, X-Gateway-User %q", e.up.auth, e.up.gateway)
	}
}

// TestMetrics: with the command's Prometheus metrics as Observer and
// handler, GET /metrics (no key) counts each request by outcome, the memory
// step by outcome (enriched, skipped with X-Memory: off, empty for a user
// with no memory), the upstream's answers by status class, and the turns
// published; no series names a user.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) {
		m := promMetrics()
		c.Observer, c.Metrics = m, m.Handler()
	})
	e.setFact(t, "alice", "location", "Lisbon")
	post := func(key, memory string) int {
		t.Helper()
		auth := ""
		if key != "" {
			auth = "Bearer " + key
		}
		return e.post(t, "Authorization", auth, proxy.MemoryHeader, memory)
	}
	for _, c := range []struct {
		key, memory, mode string
		want              int
	}{
		{e.keys["alice"], "", "", http.StatusOK},    // enriched, published
		{e.keys["alice"], "off", "", http.StatusOK}, // skipped, not published
		{e.keys["bob"], "", "", http.StatusOK},      // empty, published
		{"", "", "", http.StatusUnauthorized},       // no key
		{e.keys["alice"], "off", "500", http.StatusInternalServerError},
	} {
		e.up.setMode(c.mode)
		if code := post(c.key, c.memory); code != c.want {
			t.Fatalf("%+v: %d", c, code)
		}
	}
	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + e.proxy.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	// Turns are published after the response: wait for both.
	var body string
	eventstest.Eventually(t, "2 turns published", time.Minute, func() (bool, string) {
		body = scrape()
		return strings.Contains(body, `memoryd_proxy_turns_published_total{outcome="published"} 2`), body
	})
	for _, want := range []string{
		`memoryd_proxy_requests_total{endpoint="chat",outcome="ok"} 3`,
		`memoryd_proxy_requests_total{endpoint="chat",outcome="unauthorized"} 1`,
		`memoryd_proxy_requests_total{endpoint="chat",outcome="upstream_status"} 1`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="enriched"} 1`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="empty"} 1`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="skipped"} 2`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="degraded"} 0`,
		`memoryd_proxy_upstream_duration_seconds_count{class="2xx"} 3`,
		`memoryd_proxy_upstream_duration_seconds_count{class="5xx"} 1`,
		`memoryd_proxy_turns_published_total{outcome="failed"} 0`,
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, user := range []string{"alice", "bob"} {
		if strings.Contains(body, user) {
			t.Errorf("/metrics names user %s", user)
		}
	}
}

// Secrets are never logged: an upstream URL holding a password is logged
// without it (an operator's walk found "proxy listening" logging it whole).
func TestUpstreamPasswordIsNotLogged(t *testing.T) {
	logs := &eventstest.SyncBuffer{}
	newEnv(t, func(c *proxy.Config) {
		c.Upstream = strings.Replace(c.Upstream, "http://", "http://user:upsecret@", 1)
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	out := logs.String()
	if !strings.Contains(out, "proxy listening") || !strings.Contains(out, "user:xxxxx@") {
		t.Errorf("the start's log does not name the upstream with its password hidden: %q", out)
	}
	if strings.Contains(out, "upsecret") {
		t.Errorf("the upstream's password is in the log: %q", out)
	}
}

// A secret in the upstream's query (Azure's api-version beside a gateway's
// ?api-key=) stays out of the log of an upstream that cannot be reached:
// net/http's error quotes the whole URL (an operator's walk found
// "upstream request failed" logging ?api-key=SECRET).
func TestUpstreamQuerySecretIsNotLogged(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	logs := &eventstest.SyncBuffer{}
	e := newEnv(t, func(c *proxy.Config) {
		c.Upstream = "http://user:upsecret@" + dead + "/v1?api-version=1&api-key=qsecret"
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	if code := e.post(t, "Authorization", "Bearer "+e.keys["alice"]); code != http.StatusBadGateway {
		t.Fatalf("chat to a dead upstream: %d, want 502", code)
	}
	out := logs.String()
	if !strings.Contains(out, "upstream request failed") || !strings.Contains(out, "/v1/chat/completions?...") {
		t.Errorf("the failure is not logged with the upstream's path: %q", out)
	}
	if strings.Contains(out, "qsecret") || strings.Contains(out, "upsecret") {
		t.Errorf("a secret of the upstream's URL is in the log: %q", out)
	}
}

// The proxy answers probes without a key, as /metrics: /healthz while the
// process runs, /readyz while it can reach memoryd (its NATS connection is
// up), so that `memoryd health` and an orchestrator can probe it (an
// operator's walk: both were 404).
func TestProbes(t *testing.T) {
	t.Parallel()
	own := eventstest.Conn(t)
	e := newEnv(t, func(c *proxy.Config) { c.Conn = own })
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + e.proxy.Addr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || !strings.Contains(body, `"nats":"ok"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	own.Close()
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not connected") {
		t.Errorf("/readyz with NATS gone: %d %s, want 503", code, body)
	}
}

// TestUnknownPathSaysWhatIsServed: a 404 lists what the proxy serves,
// /metrics included when it is on, and an app whose base URL lacks /v1 (it
// asks for /chat/completions) is told to add it (a newcomer's walk: the
// message named neither); an app asking for the Responses API (the Vercel
// AI SDK's default openai(model)) is told to use Chat Completions.
func TestUnknownPathSaysWhatIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) {
		m := promMetrics()
		c.Observer, c.Metrics = m, m.Handler()
	})
	base := "http://" + e.proxy.Addr()
	for _, c := range []struct {
		method, path string
		want         []string
		not          []string
	}{
		{"POST", "/chat/completions", []string{"GET /metrics", "must end in /v1", "(http://" + e.proxy.Addr() + "/v1)"}, nil},
		{"GET", "/models", []string{"must end in /v1"}, nil},
		{"POST", "/v1/embeddings", []string{"GET /metrics", "not POST /v1/embeddings", "upstream's own base URL"}, []string{"must end in /v1"}},
		{"GET", "/v1/files", []string{"upstream's own base URL"}, nil},
		// The Vercel AI SDK's default openai(model) asks for the Responses
		// API: the 404 must say which call reaches the proxy.
		{"POST", "/v1/responses", []string{"not POST /v1/responses", "Chat Completions API only", "openai.chat(model)"}, []string{"must end in /v1", "upstream's own base URL"}},
		{"POST", "/v1/embeddings", nil, []string{"Chat Completions API only"}},
	} {
		req, err := http.NewRequest(c.method, base+c.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		code, body := roundTrip(t, req)
		if code != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404", c.method, c.path, code, body)
		}
		for _, w := range c.want {
			if !strings.Contains(string(body), w) {
				t.Errorf("%s %s: %s, want it to say %q", c.method, c.path, body, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(string(body), n) {
				t.Errorf("%s %s: %s, should not say %q", c.method, c.path, body, n)
			}
		}
	}
}

// TestUpstreamCutReachesTheClient: a reply the upstream breaks off must not
// reach the client as a whole one.
func TestUpstreamCutReachesTheClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.up.setMode("cut")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("a cut upstream stream reached the client as a complete response: %q", b)
	}
}

// TestUpstreamStreamEndingEarlyReachesTheClientCut: an upstream stream
// whose body ends without a finish reason or [DONE] (a close-delimited body
// cut by a dropped connection reads as a clean end) is a stream without its
// end: the client's response is cut, not ended as whole, with memory on or
// off, the outcome is cut, and nothing is remembered.
func TestUpstreamStreamEndingEarlyReachesTheClientCut(t *testing.T) {
	t.Parallel()
	obs := &outcomes{}
	e := newEnv(t, func(c *proxy.Config) { c.Observer = obs })
	e.up.setMode("endearly")
	for _, memory := range []string{"", "off"} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"I live in Oslo"}]}`))
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		if memory != "" {
			req.Header.Set(proxy.MemoryHeader, memory)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("memory %q: a stream ended without a finish reason or [DONE] reached the client as a complete response: %q", memory, b)
		}
	}
	if n := obs.count("chat", proxy.OutcomeCut); n != 2 {
		t.Errorf("%d requests counted cut, want 2", n)
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for a stream without its end, want 0", n)
	}
}

// TestStalledUpstreamIsCut: an upstream stream that stops sending after its
// first chunk is cancelled after UpstreamIdle: the client's response is
// cut (not ended as whole), the upstream request ends, the outcome is
// upstream_stalled, and nothing is remembered.
func TestStalledUpstreamIsCut(t *testing.T) {
	t.Parallel()
	obs := &outcomes{}
	e := newEnv(t, func(c *proxy.Config) { c.UpstreamIdle, c.Observer = 300*time.Millisecond, obs })
	e.up.setMode("stall")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"I live in Oslo"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	// The client's own bound only keeps a regression from hanging the
	// suite: it ends the read too, but not with the outcome checked below.
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("a stalled upstream stream reached the client as a complete response: %q", b)
	}
	if n := obs.count("chat", proxy.OutcomeUpstreamStalled); n != 1 {
		t.Errorf("%d requests counted upstream_stalled, want 1", n)
	}
	eventstest.Eventually(t, "the upstream's stalled request to be cancelled", 10*time.Second, func() (bool, string) {
		e.up.mu.Lock()
		defer e.up.mu.Unlock()
		return e.up.stallEnded == 1, fmt.Sprintf("ended %d times", e.up.stallEnded)
	})
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for a stalled reply, want 0", n)
	}
}

// TestToolLoopRoundAfterAForget: a tool-call loop's later round (its last
// user message followed by the calls and results) is enriched anew, so a
// clear or a forget between rounds reaches it. A version that kept the
// first round's injection for the later rounds (for the model server's
// prefix cache) sent the forgotten fact again (a review).
func TestToolLoopRoundAfterAForget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.setFact(t, "alice", "location", "Rome")
	const question = `{"role":"user","content":"forget where I live"}`
	const round = `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"delete_memory","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"done"}`
	// The last user message as the upstream got it.
	userContent := func(body string) string {
		t.Helper()
		e.chat(t, body, nil)
		var msgs []map[string]json.RawMessage
		if err := json.Unmarshal(e.up.last(t)["messages"], &msgs); err != nil {
			t.Fatal(err)
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			if string(msgs[i]["role"]) == `"user"` {
				return string(msgs[i]["content"])
			}
		}
		t.Fatal("no user message forwarded")
		return ""
	}
	if got := userContent(`{"model":"m","messages":[` + question + `]}`); !strings.Contains(got, "Rome") {
		t.Fatalf("first round not enriched: %s", got)
	}
	if _, err := e.memory.ClearFact(context.Background(), "alice", "location"); err != nil {
		t.Fatal(err)
	}
	if got := userContent(`{"model":"m","messages":[` + question + round + `]}`); strings.Contains(got, "Rome") {
		t.Errorf("the round after the fact was cleared still injected it: %s", got)
	}
}

// outcomes is a proxy.Observer counting request outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) Request(endpoint, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[endpoint+" "+outcome]++
}
func (o *outcomes) Enriched(outcome string, _ time.Duration) { o.Request("enrich", outcome) }
func (o *outcomes) Upstream(time.Duration, string)           {}
func (o *outcomes) TurnPublished(ok bool) {
	o.Request("publish", map[bool]string{true: "published", false: "failed"}[ok])
}
func (o *outcomes) count(endpoint, outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[endpoint+" "+outcome]
}

// TestUpstreamWithAQuery: an upstream URL with a query (Azure OpenAI's
// ?api-version=) gets each endpoint's path before it. Before, the path was
// appended after the query: every request reached the base URL with a
// query of "api-version=2024-06-01/chat/completions".
func TestUpstreamWithAQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.Upstream += "/?api-version=2024-06-01" })
	if code := e.post(t, "Authorization", "Bearer "+e.keys["alice"]); code != http.StatusOK {
		t.Fatalf("chat: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/models/fake-model", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	if code, b := roundTrip(t, req); code != http.StatusOK || !strings.Contains(string(b), `"id":"fake-model"`) {
		t.Fatalf("models: %d %s", code, b)
	}
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	if !slices.Equal(e.up.queries, []string{"api-version=2024-06-01", "api-version=2024-06-01"}) {
		t.Fatalf("the upstream got queries %q, want the configured one with each request", e.up.queries)
	}
}

// TestModelsPathStaysUnderModels: GET /v1/models/{id} cannot reach another
// upstream endpoint with the upstream key.
func TestModelsPathStaysUnderModels(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, p := range []string{"/v1/models/..%2Ffiles", "/v1/models/%2e%2e/files", "/v1/models/x%2F..%2F..%2Ffiles", "/v1/models/a/./b"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.proxy.Addr()+p, nil)
		req.URL.RawPath, req.URL.Opaque = "", p
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "reached") {
			t.Errorf("%s reached the upstream outside /models: %s %s", p, resp.Status, b)
		}
	}
	for _, id := range []string{"fake-model", "org/model-name", "ft:gpt-4o:org:x"} {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/models/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), id) {
			t.Errorf("model %s: %s %s", id, resp.Status, b)
		}
	}
}

// TestLongMessageIsRemembered: a user message over the turn's 64 KiB (a
// pasted text before the question) is remembered by its end, the part
// enrich searched with. Before, the publish refused the turn (logged as an
// error) and nothing of it was remembered.
func TestLongMessageIsRemembered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	msg := strings.Repeat("some pasted log line of no interest\n", 3000) + "By the way, my boat is named Aurora."
	body, err := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": msg}}})
	if err != nil {
		t.Fatal(err)
	}
	e.chat(t, string(body), nil)
	eventstest.Eventually(t, "the turn published", time.Minute, func() (bool, string) {
		n := e.turnsPublished(t, "alice")
		return n == 1, fmt.Sprintf("%d turns", n)
	})
	e.waitProcessed(t, "alice", 1)
	reply, err := e.memory.Search(context.Background(), events.SearchRequest{UserID: "alice", Query: "what is my boat named?"})
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.Results) == 0 || !strings.Contains(reply.Results[0].Question, "Aurora") || len(reply.Results[0].Question) > events.MaxUserMessageBytes {
		t.Fatalf("search for the boat: %d results", len(reply.Results))
	}
}

// TestClientCredentialsStayHere: a client's other credentials and account
// selectors (cookies, Azure's api-key, OpenAI-Organization and -Project)
// and the headers its Connection header names are not forwarded with the
// operator's key, so a user cannot choose which
// organisation or project pays; the bearer scheme is accepted in any case.
func TestClientCredentialsStayHere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	h := http.Header{}
	for _, k := range []string{"Cookie", "Api-Key", "X-Api-Key", "OpenAI-Organization", "OpenAI-Project"} {
		h.Set(k, "client-"+k)
	}
	h.Set("X-Custom", "kept")
	// A header the client names in Connection is its connection's alone
	// (RFC 9110, 7.6.1).
	h.Set("Connection", "keep-alive, X-Hop-Only")
	h.Set("X-Hop-Only", "client-hop")
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	req.Header = h
	req.Header.Set("Authorization", "bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("lower-case bearer: %s", resp.Status)
	}
	e.up.mu.Lock()
	got := e.up.headers[len(e.up.headers)-1]
	e.up.mu.Unlock()
	for k, v := range got {
		if strings.HasPrefix(strings.Join(v, ","), "client-") {
			t.Errorf("%s reached the upstream: %v", k, v)
		}
	}
	if got.Get("X-Custom") != "kept" || got.Get("Authorization") != "Bearer "+upstreamKey {
		t.Errorf("upstream headers %v", got)
	}
}

// TestUpstreamRefusesItsKey: the upstream refusing the proxy's own key is
// a 502 naming that, not a relayed 401 quoting the operator's key that
// the chat app would blame on its user's key, and one the SDKs do not
// retry.
func TestUpstreamRefusesItsKey(t *testing.T) {
	t.Parallel()
	logs := &eventstest.SyncBuffer{}
	e := newEnv(t, func(c *proxy.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	e.up.setMode("401")
	for _, path := range []string{"/chat/completions"} {
		req, _ := http.NewRequest(http.MethodPost, e.url+path, strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "upstream_auth_failed") || strings.Contains(string(b), "upstr") && strings.Contains(string(b), "***") {
			t.Errorf("%s with the upstream refusing its key: %s %s", path, resp.Status, b)
		}
		// Not retried by OpenAI's SDKs (twice by default for a 5xx): it
		// would fail alike.
		if got := resp.Header.Get("X-Should-Retry"); got != "false" {
			t.Errorf("%s with the upstream refusing its key: X-Should-Retry %q, want false", path, got)
		}
	}
	// The operator is told both ways to fix it (a walk with the key in
	// --upstream-key-file was pointed at --upstream-key only).
	if l := logs.String(); !strings.Contains(l, "--upstream-key-file") || !strings.Contains(l, "from_file=false") {
		t.Errorf("log of the refusal: %s", l)
	}
}

// TestGatewayOnlyNamesItsHeader: a proxy behind a gateway, without keys,
// answers a request without the gateway's header with a 401 naming the
// header (before: a message about memoryd keys, which it does not use),
// with a challenge of its realm that calls no token invalid: it looks at
// none.
func TestGatewayOnlyNamesItsHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.Keys, c.TrustedUserHeader = nil, "X-Gateway-User" })
	for _, auth := range []string{"", "Bearer mk-anything"} {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "X-Gateway-User header") || strings.Contains(string(b), "keys add") {
			t.Fatalf("no gateway header, Authorization %q: %s %s", auth, resp.Status, b)
		}
		if got, want := resp.Header.Values("WWW-Authenticate"), `Bearer realm="`+proxy.Realm+`"`; len(got) != 1 || got[0] != want {
			t.Errorf("no gateway header, Authorization %q: WWW-Authenticate %q, want %q", auth, got, want)
		}
	}
}

// roundTrip sends req and returns the response's status and whole body.
func roundTrip(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestMemoryHeaderValues: X-Memory takes off, false, 0 and no (any case)
// for an opt-out, and refuses a value it does not know with a 400 before
// the upstream is asked: before, anything but "off" was ignored, and a
// request meant to be forgotten was remembered. The header sent twice is a
// 400 whatever the order, as the body field given twice is: only its first
// line was read, so "on" then "off" was enriched and remembered (a walk
// with curl, two header lines).
func TestMemoryHeaderValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	auth := "Bearer " + e.keys["alice"]
	for _, v := range []string{"false", "0", "NO", " Off "} {
		if code := e.post(t, "Authorization", auth, proxy.MemoryHeader, v); code != http.StatusOK {
			t.Errorf("X-Memory %q: %d, want 200", v, code)
		}
	}
	for _, v := range []string{"disabled", "nope"} {
		if code := e.post(t, "Authorization", auth, proxy.MemoryHeader, v); code != http.StatusBadRequest {
			t.Errorf("X-Memory %q: %d, want 400", v, code)
		}
	}
	for _, vs := range [][2]string{{"on", "off"}, {"off", "on"}, {"off", "off"}} {
		if code := e.post(t, "Authorization", auth, proxy.MemoryHeader, vs[0], proxy.MemoryHeader, vs[1]); code != http.StatusBadRequest {
			t.Errorf("X-Memory %q then %q: %d, want 400", vs[0], vs[1], code)
		}
	}
	if code := e.post(t, "Authorization", auth, proxy.MemoryHeader, "on"); code != http.StatusOK {
		t.Errorf("X-Memory on: %d, want 200", code)
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 1 {
		t.Fatalf("%d turns published, want 1 (the request with memory on)", n)
	}
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	if len(e.up.requests) != 5 {
		t.Fatalf("the upstream got %d requests, want 5 (none for the refused values, nor for the header twice)", len(e.up.requests))
	}
}

// TestUpstreamKeyHeader: with UpstreamKeyHeader the upstream's key goes in
// that header as it is (Azure OpenAI's api-key), with no Authorization;
// the client's own api-key header is not forwarded. A bad name is refused.
func TestUpstreamKeyHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.UpstreamKeyHeader = "api-key" })
	if code := e.post(t, "Authorization", "Bearer "+e.keys["alice"], "Api-Key", "client-secret"); code != http.StatusOK {
		t.Fatalf("chat: %d", code)
	}
	e.up.mu.Lock()
	h := e.up.headers[len(e.up.headers)-1]
	e.up.mu.Unlock()
	if got := h.Values("Api-Key"); len(got) != 1 || got[0] != upstreamKey || h.Get("Authorization") != "" {
		t.Fatalf("the upstream got api-key %q, Authorization %q; want only the upstream's key in api-key", got, h.Get("Authorization"))
	}
	if _, err := proxy.New(proxy.Config{Upstream: "http://127.0.0.1:1/v1", TrustedUserHeader: "X-User", Conn: e.nc, UpstreamKeyHeader: "api key"}); err == nil {
		t.Error("UpstreamKeyHeader with a space: no error")
	}
}

// TestUpstreamKeyFileRotated: a key given by file (--upstream-key-file) is
// read again when the file changes, so a key rotated in it is sent from
// the next request on, without a restart of the proxy.
func TestUpstreamKeyFileRotated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "upstream-key")
	replace := func(text string) { secretfiletest.Replace(t, path, text) }
	replace("first-upstream-key\n")
	e := newEnv(t, func(c *proxy.Config) { c.UpstreamKey, c.UpstreamKeyFile = "", path })
	sent := func() string {
		t.Helper()
		if code := e.post(t, "Authorization", "Bearer "+e.keys["alice"]); code != http.StatusOK {
			t.Fatalf("chat: %d", code)
		}
		e.up.mu.Lock()
		defer e.up.mu.Unlock()
		return e.up.headers[len(e.up.headers)-1].Get("Authorization")
	}
	if got := sent(); got != "Bearer first-upstream-key" {
		t.Fatalf("the upstream got %q, want the file's key", got)
	}
	replace("second-upstream-key")
	if got := sent(); got != "Bearer second-upstream-key" {
		t.Fatalf("after the rotation the upstream got %q, want the file's new key", got)
	}
	if _, err := proxy.New(proxy.Config{Upstream: "http://127.0.0.1:1/v1", TrustedUserHeader: "X-User", Conn: e.nc, UpstreamKey: "k", UpstreamKeyFile: path}); err == nil {
		t.Error("UpstreamKey with UpstreamKeyFile: no error")
	}
}

// TestUpstreamKeyHeaderClientsOwnNotForwarded: the client's own header of
// UpstreamKeyHeader's name never reaches the upstream, even with no
// UpstreamKey to replace it (an empty --upstream-key, e.g. its variable
// unset).
func TestUpstreamKeyHeaderClientsOwnNotForwarded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.UpstreamKey, c.UpstreamKeyHeader = "", "Ocp-Apim-Subscription-Key" })
	if code := e.post(t, "Authorization", "Bearer "+e.keys["alice"], "Ocp-Apim-Subscription-Key", "client-secret"); code != http.StatusOK {
		t.Fatalf("chat: %d", code)
	}
	e.up.mu.Lock()
	h := e.up.headers[len(e.up.headers)-1]
	e.up.mu.Unlock()
	if got := h.Values("Ocp-Apim-Subscription-Key"); len(got) != 0 {
		t.Fatalf("the client's own %q reached the upstream", got)
	}
}

// A client's keep-alive connection idle past ClientIdle is closed: without
// an idle bound net/http keeps one forever, and /healthz needs no key, so
// anyone could hold connections open until the proxy ran out of file
// descriptors (a security review's walk: 118 idle connections, each opened
// with one GET /healthz, refused every later client with "accept4: too
// many open files").
func TestIdleClientConnectionIsClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.ClientIdle = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", e.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server closes the idle connection: the read ends with EOF long
	// before this deadline (a timeout here means it was kept open).
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: read gave %v, want EOF (the server closing it)", err)
	}
}

// TestSlowBodyIsRefused: a client holding a key that sends its body a
// little at a time is answered 408 once Config.BodyTimeout passes, not
// held without end (security walk: nothing bounded the body's read).
func TestSlowBodyIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.BodyTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", e.proxy.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + e.keys["alice"] +
		"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	// The rest of the body never comes; the answer must (a timeout here
	// means the request was held open).
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("slow body: %v, want a 408", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "request_timeout") {
		t.Fatalf("slow body: %d %s, want 408 request_timeout", resp.StatusCode, b)
	}
	if n := len(e.up.requests); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}

// TestBodyTimeoutEndsWithTheBody: the body's deadline ends with the body,
// so an answer streamed for longer than BodyTimeout reaches the client
// whole and is remembered.
func TestBodyTimeoutEndsWithTheBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.BodyTimeout = 150 * time.Millisecond })
	e.up.setMode("slow") // five words 100 ms apart: 500 ms
	e.chat(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"I keep bees in Porto"}]}`, nil)
	e.up.mu.Lock()
	sent := string(e.up.sent)
	e.up.mu.Unlock()
	if !strings.Contains(sent, "[DONE]") {
		t.Fatalf("the upstream's stream did not end: %q", sent)
	}
	e.waitProcessed(t, "alice", 1)
}

// TestSlowBodyOfAnUnreadRequestIsCutOff: a request the proxy answers
// without reading its body (no key or a wrong one, a probe, an unknown
// path) is bounded by BodyTimeout too. net/http reads such a body (up to
// 256 KiB) before it sends the answer's headers, so without a deadline a
// client with no key at all held the request open, unanswered, by never
// sending the body it announced (a review: only the chat's own read of
// the body had the deadline).
func TestSlowBodyOfAnUnreadRequestIsCutOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) { c.BodyTimeout = 200 * time.Millisecond })
	for _, head := range []string{
		"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer not-a-key\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\":",
		"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx",
		"POST /v1/embeddings HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\nx",
	} {
		conn, err := net.Dial("tcp", e.proxy.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(head)); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v, want an answer (a timeout: the request was held open)", strings.SplitN(head, "\r\n", 2)[0], err)
		}
		resp.Body.Close()
	}
}

// promMetrics are the command's Prometheus metrics of the proxy, as
// memoryd proxy wires them.
func promMetrics() *app.ProxyMetrics {
	return app.NewProxyMetrics(app.ProxyLabels{Endpoints: proxy.Endpoints(), Outcomes: proxy.Outcomes(), EnrichOutcomes: proxy.EnrichOutcomes()})
}

// TestMetricsReadZeroAtStart: every request and enrich outcome the proxy
// reports is on its /metrics at 0 before the first request (a metrics walk:
// an alert on the increase of upstream_unreachable missed the first
// outage, the series appearing with it).
func TestMetricsReadZeroAtStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *proxy.Config) {
		m := promMetrics()
		c.Observer, c.Metrics = m, m.Handler()
	})
	resp, err := http.Get("http://" + e.proxy.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, w := range []string{`memoryd_proxy_requests_total{endpoint="chat",outcome="upstream_unreachable"} 0`,
		`memoryd_proxy_requests_total{endpoint="models",outcome="ok"} 0`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="skipped"} 0`,
		`memoryd_proxy_enrich_duration_seconds_count{outcome="empty"} 0`} {
		if !strings.Contains(string(b), w+"\n") {
			t.Errorf("/metrics at start lacks %q", w)
		}
	}
}
