package embedding_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/internal/modelerr"
)

func newClient(t *testing.T, srv *embeddingtest.Server, cfg embedding.Config) *embedding.Client {
	t.Helper()
	cfg.BaseURL = srv.URL
	c, err := embedding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEmbedBatches(t *testing.T) {
	srv := embeddingtest.New(t)
	c := newClient(t, srv, embedding.Config{Model: "m1", BatchSize: 3})
	texts := []string{"my dog is named Rex", "a", "b", "c", "d", "e", "the dog Rex"}
	vs, err := c.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Batches(); !slices.Equal(got, []int{3, 3, 1}) {
		t.Errorf("batches %v, want [3 3 1]", got)
	}
	if got := srv.Models(); got[0] != "m1" {
		t.Errorf("model sent %q, want m1", got[0])
	}
	if len(vs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vs), len(texts))
	}
	for i, text := range texts {
		if !slices.Equal(vs[i], embeddingtest.Vector(text, embeddingtest.DefaultDims)) {
			t.Errorf("vector %d is not the text's (order lost?)", i)
		}
	}
	if c.Dims() != embeddingtest.DefaultDims {
		t.Errorf("Dims %d, want %d", c.Dims(), embeddingtest.DefaultDims)
	}
	srv.SetDims(32)
	if _, err := c.Embed(context.Background(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if c.Dims() != 32 {
		t.Errorf("Dims after the server changed them: %d, want 32", c.Dims())
	}
}

func TestEmbedErrorsClassified(t *testing.T) {
	cases := []struct {
		status     int
		retryAfter string
		kind       embedding.Kind
		delay      time.Duration
		// inputMayBeCause: a batch failing so may have failed for one
		// of its texts.
		inputMayBeCause bool
		// unreachable: the server is down or restarting (IsUnreachable).
		unreachable bool
	}{
		{http.StatusInternalServerError, "", embedding.KindTransient, 0, true, false},
		{http.StatusBadGateway, "", embedding.KindTransient, 0, false, true},
		{http.StatusRequestTimeout, "", embedding.KindTransient, 0, true, false},
		{http.StatusServiceUnavailable, "", embedding.KindTransient, 0, false, true},
		{http.StatusGatewayTimeout, "", embedding.KindTransient, 0, false, true},
		{http.StatusServiceUnavailable, "7", embedding.KindRetryAfter, 7 * time.Second, false, false},
		{http.StatusTooManyRequests, "", embedding.KindRetryAfter, time.Second, false, false},
		{http.StatusTooManyRequests, "3", embedding.KindRetryAfter, 3 * time.Second, false, false},
		{http.StatusTooManyRequests, "99999", embedding.KindRetryAfter, embedding.MaxRetryAfter, false, false},
		// The key or the model refused: waited for as an outage, no
		// text's fault (misconfigured: TestEmbedRefusedConfiguration).
		{http.StatusUnauthorized, "", embedding.KindTransient, 0, false, true},
		{http.StatusNotFound, "", embedding.KindTransient, 0, false, true},
		// One 403 alone may be that request's.
		{http.StatusForbidden, "", embedding.KindPermanent, 0, true, false},
		{http.StatusBadRequest, "", embedding.KindPermanent, 0, true, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.retryAfter), func(t *testing.T) {
			srv := embeddingtest.New(t)
			srv.Fail(tc.status, tc.retryAfter)
			c := newClient(t, srv, embedding.Config{})
			_, err := c.Embed(context.Background(), []string{"hello"})
			if got := embedding.KindOf(err); got != tc.kind {
				t.Fatalf("kind %v, want %v (err %v)", got, tc.kind, err)
			}
			if got := embedding.InputMayBeCause(err); got != tc.inputMayBeCause {
				t.Errorf("InputMayBeCause = %v, want %v", got, tc.inputMayBeCause)
			}
			if got := embedding.IsUnreachable(err); got != tc.unreachable {
				t.Errorf("IsUnreachable = %v, want %v", got, tc.unreachable)
			}
			d, ok := embedding.RetryAfterOf(err)
			if ok != (tc.kind == embedding.KindRetryAfter) || d != tc.delay {
				t.Errorf("retry after %s %v, want %s", d, ok, tc.delay)
			}
			sentinels := map[embedding.Kind]error{embedding.KindTransient: embedding.ErrTransient,
				embedding.KindRetryAfter: embedding.ErrRetryAfter, embedding.KindPermanent: embedding.ErrPermanent}
			for k, s := range sentinels {
				if errors.Is(err, s) != (k == tc.kind) {
					t.Errorf("errors.Is(err, %v) = %v", s, !(k == tc.kind))
				}
			}
		})
	}
}

func TestEmbedUnreachableAndTimeout(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.SetDelay(time.Minute)
	c := newClient(t, srv, embedding.Config{Timeout: 50 * time.Millisecond})
	var e *embedding.Error
	if _, err := c.Embed(context.Background(), []string{"x"}); embedding.KindOf(err) != embedding.KindTransient || !errors.As(err, &e) || e.NotSent || e.Unreachable {
		t.Errorf("slow server: %v, want transient, sent, not unreachable", err)
	} else if !embedding.InputMayBeCause(err) {
		t.Errorf("slow server: a text may be the cause of a timeout")
	}
	down, err := embedding.New(embedding.Config{BaseURL: "http://127.0.0.1:1/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.Embed(context.Background(), []string{"x"}); embedding.KindOf(err) != embedding.KindTransient || !errors.As(err, &e) || !e.NotSent || !embedding.IsUnreachable(err) {
		t.Errorf("unreachable server: %v, want transient, not sent, unreachable", err)
	} else if embedding.InputMayBeCause(err) {
		t.Errorf("unreachable server: no text can be the cause of a request never sent")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) || embedding.KindOf(err) != embedding.KindTransient {
		t.Errorf("cancelled: %v, want transient matching context.Canceled", err)
	} else if embedding.InputMayBeCause(err) {
		t.Errorf("cancelled: no text is the cause of a cancel")
	}
	if embedding.InputMayBeCause(errors.New("database down")) {
		t.Errorf("an error that is no server's answer blames a text")
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		cfg   embedding.Config
		field string
	}{
		{embedding.Config{}, "BaseURL"},
		{embedding.Config{BaseURL: "localhost:11434"}, "BaseURL"},
		{embedding.Config{BaseURL: "http://x/v1", Timeout: -1}, "Timeout"},
		{embedding.Config{BaseURL: "http://x/v1", BatchSize: 5000}, "BatchSize"},
		{embedding.Config{BaseURL: "http://x/v1", MaxConcurrency: -1}, "MaxConcurrency"},
		{embedding.Config{BaseURL: "http://x/v1", RequestsPerSecond: -1}, "RequestsPerSecond"},
		{embedding.Config{BaseURL: "http://x/v1", APIKey: "k", APIKeyFile: "/k"}, "APIKeyFile"},
		{embedding.Config{BaseURL: "http://x/v1", APIKeyFile: "/nonexistent/k"}, "APIKeyFile:"},
		{embedding.Config{BaseURL: "http://x/v1"}, ""},
	}
	for _, tc := range cases {
		_, err := embedding.New(tc.cfg)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.field != "" && (err == nil || !containsField(err.Error(), tc.field)):
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.field)
		}
	}
	if d := (embedding.Config{}).WithDefaults(); d.Model != embedding.DefaultModel || d.BatchSize != embedding.DefaultBatchSize {
		t.Errorf("defaults %+v", d)
	}
}

func containsField(msg, field string) bool {
	return len(msg) > 0 && slices.Contains(splitWords(msg), "Config."+field)
}

func splitWords(s string) []string {
	var out []string
	word := []rune{}
	for _, r := range s {
		if r == ' ' {
			out = append(out, string(word))
			word = word[:0]
			continue
		}
		word = append(word, r)
	}
	return append(out, string(word))
}

// TestEmbedUnusableVectors: a vector with a null entry (llama.cpp's NaN), a
// null vector and a zero vector are refused, each for its own text, as
// KindPermanent listing them, and the call's other texts keep their
// vectors; a request whose every vector is unusable is the server's fault.
func TestEmbedUnusableVectors(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.BreakVector("nan", embeddingtest.NullEntries)
	srv.BreakVector("null", embeddingtest.NullVector)
	srv.BreakVector("zero", embeddingtest.ZeroVector)
	c := newClient(t, srv, embedding.Config{BatchSize: 2})
	texts := []string{"my dog Rex", "a nan text", "Paris is lovely", "a zero text", "a null text", "tea please"}
	vs, err := c.Embed(context.Background(), texts)
	if embedding.KindOf(err) != embedding.KindPermanent || !errors.Is(err, embedding.ErrPermanent) {
		t.Fatalf("err %v, want permanent", err)
	}
	if got := embedding.UnusableOf(err); !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("unusable %v, want [1 3 4]", got)
	}
	if len(vs) != len(texts) {
		t.Fatalf("%d vectors for %d texts", len(vs), len(texts))
	}
	for i, text := range texts {
		switch i {
		case 1, 3, 4:
			if vs[i] != nil {
				t.Errorf("text %d: vector %v, want none", i, vs[i][:4])
			}
		default:
			if !slices.Equal(vs[i], embeddingtest.Vector(text, embeddingtest.DefaultDims)) {
				t.Errorf("text %d: not its vector", i)
			}
		}
	}
	if _, err := c.Embed(context.Background(), []string{"a zero text"}); embedding.KindOf(err) != embedding.KindPermanent {
		t.Errorf("one text answered with a zero vector: %v, want permanent", err)
	}
	// Every vector of a request of several texts unusable: transient.
	if vs, err := c.Embed(context.Background(), []string{"nan one", "null two"}); embedding.KindOf(err) != embedding.KindTransient || vs != nil {
		t.Errorf("a request answered with unusable vectors only: %v, %d vectors, want transient and none", err, len(vs))
	}
	srv.Recover()
	srv.Garbage()
	if _, err := c.Embed(context.Background(), []string{"x"}); err == nil {
		t.Error("zero vectors accepted")
	}
}

// TestEmbedErrorQuotesServer: an error reply's message, in OpenAI's form,
// Ollama's and a bare one, is in the error (an API key it echoes
// redacted); a body without one (a proxy's HTML page) is not quoted.
func TestEmbedErrorQuotesServer(t *testing.T) {
	cases := []struct {
		status      int
		body, want  string
		notContains string
	}{
		{http.StatusUnauthorized, `{"error":{"message":"Incorrect API key provided: sk-secret123.","type":"invalid_request_error"}}`,
			"status 401: Incorrect API key provided: [redacted]", "secret123"},
		{http.StatusNotFound, `{"error":"model \"nomic\" not found, try pulling it first"}`,
			`status 404: model "nomic" not found, try pulling it first`, ""},
		{http.StatusBadRequest, `{"object":"error","message":"input too long","type":"BadRequestError","code":400}`,
			"status 400: input too long", ""},
		{http.StatusBadGateway, `<html><body>bad gateway</body></html>`, "status 502", "html"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := embeddingtest.New(t)
			srv.Fail(tc.status, "")
			srv.ErrorBody(tc.body)
			c := newClient(t, srv, embedding.Config{APIKey: "key-xyz"})
			_, err := c.Embed(context.Background(), []string{"hello"})
			var e *embedding.Error
			if !errors.As(err, &e) || e.Status != tc.status {
				t.Fatalf("err %v, want an *Error of status %d", err, tc.status)
			}
			if !strings.HasSuffix(err.Error(), tc.want) || (tc.notContains != "" && strings.Contains(err.Error(), tc.notContains)) {
				t.Errorf("err %q, want it to end %q without %q", err, tc.want, tc.notContains)
			}
		})
	}
}

// A call whose context ends while it waits for the client's concurrency
// (the slot held by a slow request) sent nothing: its error says so, and
// no text of it can be the cause. Before, it read as a failure a text may
// have caused, and a claiming embed job marked every job it had claimed
// to run alone (a review).
func TestEmbedWaitingToSendIsNotSent(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.SetDelay(time.Minute)
	c := newClient(t, srv, embedding.Config{MaxConcurrency: 1, Timeout: 2 * time.Minute})
	slow, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Embed(slow, []string{"slow"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventstest.Eventually(t, "the slow request sent", 30*time.Second, func() (bool, string) {
		return srv.Requests() > 0, ""
	})
	ctx, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	_, err := c.Embed(ctx, []string{"waits"})
	var e *embedding.Error
	if !errors.As(err, &e) || !e.NotSent || embedding.InputMayBeCause(err) || embedding.IsUnreachable(err) {
		t.Errorf("waiting for a slot until the deadline: %v (NotSent %v, InputMayBeCause %v), want not sent, no text to blame",
			err, e != nil && e.NotSent, embedding.InputMayBeCause(err))
	}
}

// TestErrorHidesAnEchoOfTheTexts: an embeddings server whose error message
// repeats the input (some do) gets the texts replaced in the error, which
// the worker logs; the rest of its message stays.
func TestErrorHidesAnEchoOfTheTexts(t *testing.T) {
	srv := embeddingtest.New(t)
	const text = "my sister Maria is pregnant with twins"
	srv.ErrorBody(`{"error":{"message":"input rejected: my sister Maria is pregnant with twins"}}`)
	srv.Fail(http.StatusBadRequest, "")
	_, err := newClient(t, srv, embedding.Config{}).Embed(context.Background(), []string{text})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "pregnant") || !strings.Contains(msg, "input rejected") || !strings.Contains(msg, modelerr.EchoMark) {
		t.Errorf("error %q should keep the server's words and hide the text it repeated", msg)
	}
}

// TestRefusesConnections: the client tells a server whose address refuses
// connections (stopped, a supervisor restarting it) from one that accepts,
// answering or not; behind a proxy it never says refused, the address
// dialled without the proxy saying nothing of the server. The worker asks
// it before waking the embed jobs waiting for the server.
func TestRefusesConnections(t *testing.T) {
	ctx := context.Background()
	srv := embeddingtest.New(t)
	c := newClient(t, srv, embedding.Config{})
	proxy, _ := url.Parse("http://127.0.0.1:1")
	proxied := newClient(t, srv, embedding.Config{HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy)}}})
	if c.RefusesConnections(ctx) {
		t.Error("refuses connections while the server answers")
	}
	srv.Fail(http.StatusServiceUnavailable, "")
	if c.RefusesConnections(ctx) {
		t.Error("refuses connections while the server accepts them and answers 503")
	}
	srv.Stop()
	if !c.RefusesConnections(ctx) {
		t.Error("does not refuse connections while the server is stopped")
	}
	if proxied.RefusesConnections(ctx) {
		t.Error("a client behind a proxy refuses connections: the server's address, dialled without the proxy, says nothing")
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	srv.Recover()
	if c.RefusesConnections(ctx) {
		t.Error("refuses connections after the server's restart")
	}
	if _, err := c.Embed(ctx, []string{"back"}); err != nil {
		t.Errorf("embed after the server's restart: %v", err)
	}
}

// TestEmbedLlamaCppTooLargeIsRefusedInput: llama.cpp's 500 for an input
// over its physical batch is a refusal of the input (RefusedInput, so the
// worker leaves that text lexical-only and enrich's breaker does not count
// a long query against the server), unlike any other 500. Before, it was
// transient: retried for good.
func TestEmbedLlamaCppTooLargeIsRefusedInput(t *testing.T) {
	for _, tc := range []struct {
		body    string
		refused bool
	}{
		{`{"error":{"code":500,"message":"input is too large to process. increase the physical batch size","type":"server_error"}}`, true},
		{`{"error":{"code":500,"message":"input (612 tokens) is too large to process. increase the physical batch size (current batch size: 512)","type":"server_error"}}`, true},
		{`{"error":{"code":500,"message":"CUDA error: out of memory","type":"server_error"}}`, false},
	} {
		srv := embeddingtest.New(t)
		srv.Fail(http.StatusInternalServerError, "")
		srv.ErrorBody(tc.body)
		c := newClient(t, srv, embedding.Config{})
		_, err := c.Embed(context.Background(), []string{"hello"})
		if got := embedding.RefusedInput(err); got != tc.refused {
			t.Errorf("%s: RefusedInput = %v, want %v (err %v)", tc.body, got, tc.refused, err)
		}
		if want := map[bool]embedding.Kind{true: embedding.KindPermanent, false: embedding.KindTransient}[tc.refused]; embedding.KindOf(err) != want {
			t.Errorf("%s: kind %v, want %v", tc.body, embedding.KindOf(err), want)
		}
	}
}

// TestEmbedDimensionsSent: Config.Dimensions is sent as the request's
// "dimensions" (OpenAI's text-embedding-3-*), and left out when 0, as
// servers that know no such field (Ollama, TEI, llama.cpp) are sent; a
// client asking for them stores its vectors under a name of their own.
func TestEmbedDimensionsSent(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[0.5,0.5]}]}`)
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		dims       int
		body, name string
	}{
		{0, `{"input":["a"],"model":"text-embedding-3-small"}`, "text-embedding-3-small"},
		{2, `{"input":["a"],"model":"text-embedding-3-small","dimensions":2}`, "text-embedding-3-small?dimensions=2"},
	} {
		c, err := embedding.New(embedding.Config{BaseURL: srv.URL + "/v1", Model: "text-embedding-3-small", Dimensions: tc.dims})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Embed(context.Background(), []string{"a"}); err != nil {
			t.Fatal(err)
		}
		if got := bodies[len(bodies)-1]; got != tc.body {
			t.Errorf("dimensions %d: body %s, want %s", tc.dims, got, tc.body)
		}
		if c.Model() != tc.name {
			t.Errorf("dimensions %d: Model() %q, want %q", tc.dims, c.Model(), tc.name)
		}
	}
	if _, err := embedding.New(embedding.Config{BaseURL: srv.URL, Dimensions: -1}); err == nil || !strings.Contains(err.Error(), "Config.Dimensions must not be negative") {
		t.Errorf("Dimensions -1: %v, want refused naming the field", err)
	}
}

// TestQueryCutAfterARefusal: a client that cuts its inputs (enrich's
// queries) learns from its own refusals too: after a long query refused
// for its length, the next is cut to half of it and embedded (a process
// whose embed jobs taught it nothing: an enrich-only serve).
func TestQueryCutAfterARefusal(t *testing.T) {
	srv := embeddingtest.New(t)
	srv.RefuseOver(3000)
	c := newClient(t, srv, embedding.Config{Model: "m", CutInputs: true})
	long := strings.Repeat("a long pasted paragraph ", 250) // 6,000 bytes
	if _, err := c.Embed(context.Background(), []string{long}); !embedding.RefusedInput(err) {
		t.Fatalf("the first long query: %v, want refused", err)
	}
	if _, err := c.Embed(context.Background(), []string{long + " again"}); err != nil {
		t.Errorf("the second long query: %v, want its start embedded", err)
	}
	// A short text refused (for what it holds) teaches nothing.
	srv.RefuseContaining("POISON")
	if _, err := c.Embed(context.Background(), []string{"POISON"}); !embedding.RefusedInput(err) {
		t.Fatalf("POISON: %v, want refused", err)
	}
	if _, err := c.Embed(context.Background(), []string{long}); err != nil {
		t.Errorf("a long query after a short text refused: %v", err)
	}
	if in := srv.Inputs(); len(in[len(in)-1]) > 3000 {
		t.Errorf("the last query was sent as %d bytes, want at most 3000", len(in[len(in)-1]))
	}
}

// TestQueryCutIgnoresARefusalOfWhatItHolds: a text refused no longer than
// one the server took was refused for what it holds, not its length, and
// teaches no cut: before, a 3,000-byte text refused after 3,500 taken set
// the cut to 1,500 bytes, and every later long query of the process (an
// enrich-only serve sends no longer text again) was cut to it.
func TestQueryCutIgnoresARefusalOfWhatItHolds(t *testing.T) {
	srv := embeddingtest.New(t)
	c := newClient(t, srv, embedding.Config{Model: "m", CutInputs: true})
	if _, err := c.Embed(context.Background(), []string{strings.Repeat("a", 3500)}); err != nil {
		t.Fatal(err)
	}
	srv.RefuseContaining("POISON")
	if _, err := c.Embed(context.Background(), []string{"POISON" + strings.Repeat("b", 3000)}); !embedding.RefusedInput(err) {
		t.Fatalf("POISON: %v, want refused", err)
	}
	long := strings.Repeat("c", 5000)
	if _, err := c.Embed(context.Background(), []string{long}); err != nil {
		t.Fatal(err)
	}
	if in := srv.Inputs(); len(in[len(in)-1]) != len(long) {
		t.Errorf("a long query after a refusal of what a text held was sent as %d bytes, want all %d", len(in[len(in)-1]), len(long))
	}
}

// TestEmbedDimensionsIgnoredIsMisconfigured: a server that does not take
// "dimensions" (Ollama's, most local ones) answers its model's own size;
// before, those vectors were stored under the name of the size asked
// (model?dimensions=N) without a word. It is the configuration's error,
// as a wrong model's: every request fails alike until it is changed.
func TestEmbedDimensionsIgnoredIsMisconfigured(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[0.5,0.5,0.5,0.5]}]}`)
	}))
	t.Cleanup(srv.Close)
	c, err := embedding.New(embedding.Config{BaseURL: srv.URL + "/v1", Model: "nomic-embed-text", Dimensions: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Embed(context.Background(), []string{"a"})
	if !embedding.IsMisconfigured(err) || !strings.Contains(fmt.Sprint(err), "4 dimensions where 2 were asked") {
		t.Errorf("4 dimensions answered where 2 asked: %v, want the configuration refused, naming both", err)
	}
}
