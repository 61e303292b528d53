// Package embedding turns text into vectors with any OpenAI-compatible
// /v1/embeddings endpoint (Ollama, vLLM, llama.cpp, TEI, OpenAI) through
// go-openai's CreateEmbeddings, and holds the pure vector code: the stored
// int8 form (vector.go) and its dot product.
//
// A Client makes one attempt per request and returns a typed *Error
// (errors.go); retries are the caller's (memoryd's worker runs embedding as
// River jobs). It splits a call into requests of at most BatchSize texts,
// bounds the requests in flight (MaxConcurrency) and their rate
// (RequestsPerSecond), and learns the model's dimensions from its replies.
package embedding

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Defaults of Config.
const (
	DefaultModel          = "nomic-embed-text"
	DefaultTimeout        = 30 * time.Second
	DefaultBatchSize      = 64
	DefaultMaxConcurrency = 2
)

// Config configures New.
type Config struct {
	// BaseURL is the OpenAI-compatible API's base, e.g.
	// "http://127.0.0.1:11434/v1" (Ollama) or "https://api.openai.com/v1".
	// Required.
	BaseURL string
	// Model is the embedding model's name, stored with every vector.
	// Default DefaultModel ("nomic-embed-text", Ollama's).
	Model string
	// APIKey is sent as a bearer token when set. Default none.
	APIKey string
	// Timeout bounds one HTTP request. Default 30s.
	Timeout time.Duration
	// BatchSize is the most texts sent in one request. Default 64.
	BatchSize int
	// MaxConcurrency bounds the requests in flight across all calls of one
	// Client. Default 2.
	MaxConcurrency int
	// RequestsPerSecond spaces requests at least 1/RequestsPerSecond apart,
	// across all calls of one Client. Default 0: unlimited.
	RequestsPerSecond float64
	// HTTPClient sends the requests. Default a client without a timeout of
	// its own (Timeout applies per request).
	HTTPClient *http.Client
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	return c
}

// Validate reports the first invalid field of a config with defaults
// applied.
func (c Config) Validate() error {
	switch {
	case c.BaseURL == "":
		return errors.New("embedding: Config.BaseURL is required")
	case !strings.HasPrefix(c.BaseURL, "http://") && !strings.HasPrefix(c.BaseURL, "https://"):
		return fmt.Errorf("embedding: Config.BaseURL must be an http or https URL, not %q", c.BaseURL)
	case c.Timeout <= 0:
		return fmt.Errorf("embedding: Config.Timeout must be positive, not %s", c.Timeout)
	case c.BatchSize < 1 || c.BatchSize > 2048:
		return fmt.Errorf("embedding: Config.BatchSize must be between 1 and 2048, not %d", c.BatchSize)
	case c.MaxConcurrency < 1:
		return fmt.Errorf("embedding: Config.MaxConcurrency must be at least 1, not %d", c.MaxConcurrency)
	case c.RequestsPerSecond < 0:
		return fmt.Errorf("embedding: Config.RequestsPerSecond must not be negative, not %g", c.RequestsPerSecond)
	}
	return nil
}

// Client embeds texts. It is safe for concurrent use.
type Client struct {
	cfg    Config
	client *openai.Client
	sem    chan struct{}
	dims   atomic.Int64

	mu   sync.Mutex
	next time.Time // earliest start of the next request under RequestsPerSecond
}

// New validates cfg and returns a Client; it does not touch the network.
func New(cfg Config) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = recordingDoer{client: cfg.HTTPClient}
	return &Client{cfg: cfg, client: openai.NewClientWithConfig(oc), sem: make(chan struct{}, cfg.MaxConcurrency)}, nil
}

// Model is the configured model's name.
func (c *Client) Model() string { return c.cfg.Model }

// Timeout is Config.Timeout: the longest one request may take.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// BatchSize is Config.BatchSize.
func (c *Client) BatchSize() int { return c.cfg.BatchSize }

// Dims is the dimensions of the model's last reply, 0 before the first.
func (c *Client) Dims() int { return int(c.dims.Load()) }

// Embed returns one vector per text, in order, as the server sent them (not
// normalised; Encode normalises). Texts are sent in requests of at most
// BatchSize, one after the other; the first failure ends the call. Vectors
// of one call all have the same dimensions (a reply that changes them
// midway is KindTransient); a later call may have others, when the model
// behind the name changed. Every error is an *Error.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += c.cfg.BatchSize {
		batch := texts[start:min(start+c.cfg.BatchSize, len(texts))]
		vs, err := c.request(ctx, batch)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && len(vs[0]) != len(out[0]) {
			return nil, newError(KindTransient, "dimensions changed within one call from %d to %d", len(out[0]), len(vs[0]))
		}
		out = append(out, vs...)
	}
	return out, nil
}

// request sends one batch.
func (c *Client) request(ctx context.Context, batch []string) ([][]float32, error) {
	if err := c.acquire(ctx); err != nil {
		return nil, &Error{Kind: KindTransient, Reason: "waiting to send: " + err.Error(), Err: err}
	}
	defer func() { <-c.sem }()
	ex := &exchange{}
	rctx, cancel := context.WithTimeout(context.WithValue(ctx, exchangeKey{}, ex), c.cfg.Timeout)
	defer cancel()
	resp, err := c.client.CreateEmbeddings(rctx, openai.EmbeddingRequestStrings{Input: batch, Model: openai.EmbeddingModel(c.cfg.Model)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, &Error{Kind: KindTransient, Reason: "request: " + ctx.Err().Error(), Err: ctx.Err()}
		}
		return nil, classify(err, ex, rctx.Err() != nil, c.cfg.Timeout)
	}
	if len(resp.Data) != len(batch) {
		return nil, newError(KindTransient, "reply has %d vectors for %d inputs", len(resp.Data), len(batch))
	}
	vs := make([][]float32, len(batch))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(batch) || vs[d.Index] != nil {
			return nil, newError(KindTransient, "reply has a bad or repeated index %d", d.Index)
		}
		vs[d.Index] = d.Embedding
	}
	dims := len(vs[0])
	for _, v := range vs {
		if len(v) != dims || dims == 0 {
			return nil, newError(KindTransient, "reply mixes dimensions %d and %d", dims, len(v))
		}
	}
	c.dims.Store(int64(dims))
	return vs, nil
}

// acquire takes a slot of MaxConcurrency, then waits for the rate limit.
func (c *Client) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.cfg.RequestsPerSecond <= 0 {
		return nil
	}
	c.mu.Lock()
	now := time.Now()
	at := c.next
	if at.Before(now) {
		at = now
	}
	c.next = at.Add(time.Duration(float64(time.Second) / c.cfg.RequestsPerSecond))
	c.mu.Unlock()
	if wait := at.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			<-c.sem
			return ctx.Err()
		}
	}
	return nil
}

// classify says what a failed request means for a later attempt.
func classify(err error, ex *exchange, timedOut bool, timeout time.Duration) *Error {
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
		status int
	)
	switch {
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
	}
	if status == 0 && ex.status >= 400 {
		status = ex.status
	}
	switch {
	case timedOut:
		return newError(KindTransient, "request timed out after %s", timeout)
	case status != 0:
		e := newError(KindTransient, "status %d", status)
		e.Status = status
		delay, hasDelay := parseRetryAfter(ex.retryAfter)
		switch {
		case status == http.StatusTooManyRequests || (status == http.StatusServiceUnavailable && hasDelay):
			e.Kind, e.RetryAfter = KindRetryAfter, defaultRetryAfter
			if hasDelay {
				e.RetryAfter = min(delay, MaxRetryAfter)
			}
		case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
			e.Kind = KindPermanent
		}
		return e
	case !ex.sent:
		return newError(KindPermanent, "request rejected before sending: %s", short(err.Error()))
	case ex.status != 0:
		return newError(KindTransient, "malformed response with status %d: %s", ex.status, short(err.Error()))
	default:
		return newError(KindTransient, "connection error: %s", short(err.Error()))
	}
}

// parseRetryAfter reads a Retry-After header of whole seconds or an HTTP
// date.
func parseRetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 32); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// short bounds quoted error text.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

type exchangeKey struct{}

// exchange records the status and Retry-After of one request: go-openai's
// errors lack the headers.
type exchange struct {
	sent       bool
	status     int
	retryAfter string
}

// maxResponseBytes bounds a reply's body (2048 vectors of 4096 float32 as
// JSON fit).
const maxResponseBytes = 256 << 20

// recordingDoer sends each request once and records its exchange.
type recordingDoer struct{ client *http.Client }

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex != nil {
		ex.sent = true
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return resp, err
	}
	if ex != nil {
		ex.status = resp.StatusCode
		ex.retryAfter = resp.Header.Get("Retry-After")
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxResponseBytes), resp.Body}
	return resp, nil
}
