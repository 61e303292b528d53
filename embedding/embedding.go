// Package embedding turns text into vectors with any OpenAI-compatible
// /v1/embeddings endpoint (Ollama, vLLM, llama.cpp, TEI, OpenAI), and holds
// the pure vector code: the stored int8 form (vector.go) and its dot
// product. It speaks the protocol itself rather than through go-openai, whose
// []float32 decoding turns a null entry (llama.cpp's NaN) into a silent 0
// and whose errors drop a message not in OpenAI's form.
//
// A Client makes one attempt per request and returns a typed *Error
// (errors.go); retries are the caller's (memoryd's worker runs embedding as
// River jobs). It splits a call into requests of at most BatchSize texts,
// bounds the requests in flight (MaxConcurrency) and their rate
// (RequestsPerSecond), and learns the model's dimensions from its replies.
package embedding

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memoryd/memoryd/internal/modelerr"
	"github.com/memoryd/memoryd/internal/secretfile"
)

// Defaults of Config.
const (
	DefaultModel          = "nomic-embed-text"
	DefaultTimeout        = 30 * time.Second
	DefaultBatchSize      = 64
	DefaultMaxConcurrency = 2
	DefaultMaxProbeGap    = 5 * time.Second
)

// Config configures New.
type Config struct {
	// BaseURL is the OpenAI-compatible API's base, e.g.
	// "http://127.0.0.1:11434/v1" (Ollama) or "https://api.openai.com/v1".
	// Required.
	BaseURL string
	// Model is the embedding model's name, sent with every request and
	// stored with every vector (StoredModel). Default DefaultModel
	// ("nomic-embed-text", Ollama's).
	Model string
	// Dimensions, when positive, is sent as the request's "dimensions":
	// the vectors' size asked of a model that can shorten them (OpenAI's
	// text-embedding-3-*). Vectors of another size are another model's
	// as far as memoryd is concerned: they are stored under another name
	// (StoredModel), so that a change of it re-embeds every item as a
	// change of model does. Default 0: not sent, the model's own size.
	Dimensions int
	// APIKey is sent as a bearer token when set. Default none.
	APIKey string
	// APIKeyFile names a file holding the API key (less a trailing line
	// break), in place of APIKey: read again when it changes, so that a
	// key rotated in the file is sent from the next request on, without a
	// restart. Optional.
	APIKeyFile string
	// Logger receives the key file's warnings (a file that cannot be read
	// again). Default slog.Default().
	Logger *slog.Logger
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
	// MaxProbeGap is the longest time between two requests sent while the
	// server counts as down (Error.Unreachable: not answering, or
	// refusing the key or model): the requests between fail at once with
	// the last one's error, unsent (Error.HeldBack), and their callers
	// wait as for it. Early in an outage the gap is a quarter of the
	// outage so far, so a blip holds little back. Default 5s (the
	// extractor's LLMConfig.MaxProbeGap); negative sends every request.
	MaxProbeGap time.Duration
	// InputSizes is where the client notes how long a text the server
	// takes, shared by the clients of one server and model (memoryd's
	// embed jobs' and its queries'). Default one of its own.
	InputSizes *InputSizes
	// CutInputs cuts every text to InputSizes.Limit before sending it:
	// the start of a text longer than the server was seen to take is
	// embedded in one request, rather than refused (enrich's queries,
	// whose budget has no room for a second). Default off: the worker's
	// embed jobs find a refused text's start themselves.
	CutInputs bool
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxProbeGap == 0 {
		c.MaxProbeGap = DefaultMaxProbeGap
	}
	if c.InputSizes == nil {
		c.InputSizes = NewInputSizes()
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
	case c.APIKey != "" && c.APIKeyFile != "":
		return errors.New("embedding: Config.APIKeyFile is set with Config.APIKey; give one")
	case c.Dimensions < 0:
		return fmt.Errorf("embedding: Config.Dimensions must not be negative, not %d", c.Dimensions)
	}
	return nil
}

// StoredModel is the name vectors of this configuration are stored,
// queued and searched under: Model, and with Dimensions positive
// "?dimensions=" and it ("text-embedding-3-small?dimensions=256"). The
// same model asked for vectors of another size gives vectors that cannot
// be compared with the others: under one name, the embed jobs refused
// them as a model changed behind it (embedding_models), and no item got
// one until `memoryd embed --backfill --dims`. Under a name of their own
// they are a change of model: the sweep re-embeds every item in the
// background, while the old vectors serve the processes still asking for
// the old size (a query of the new size cannot be compared with them).
func (c Config) StoredModel() string {
	if c.Dimensions > 0 {
		return c.Model + "?dimensions=" + strconv.Itoa(c.Dimensions)
	}
	return c.Model
}

// Client embeds texts. It is safe for concurrent use.
type Client struct {
	cfg     Config
	keyFile *secretfile.File // Config.APIKeyFile's, or nil
	url     string           // BaseURL + "/embeddings"
	sem     chan struct{}
	dims    atomic.Int64

	mu   sync.Mutex
	next time.Time // earliest start of the next request under RequestsPerSecond

	// down says whether the server counts as down, and probes it
	// (outage.go).
	down downRow
}

// New validates cfg and returns a Client; it does not touch the network.
func New(cfg Config) (*Client, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keyFile, err := secretfile.Open(cfg.APIKeyFile, "embeddings api key", cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("embedding: Config.APIKeyFile: %w", err)
	}
	return &Client{cfg: cfg, keyFile: keyFile, url: strings.TrimRight(cfg.BaseURL, "/") + "/embeddings", sem: make(chan struct{}, cfg.MaxConcurrency)}, nil
}

// apiKey is the API key requests carry now (Config.APIKey, or
// APIKeyFile's value), "" for none.
func (c *Client) apiKey() string { return c.keyFile.ValueOr(c.cfg.APIKey) }

// Model is the name the client's vectors are stored under
// (Config.StoredModel): the configured model's, and its dimensions when
// they are asked for.
func (c *Client) Model() string { return c.cfg.StoredModel() }

// Timeout is Config.Timeout: the longest one request may take.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// AssumeDown takes the embeddings server's next failure that finds it down
// (within 5 minutes, until it answers) for an outage going on, as the
// extractor's LLM.AssumeDown: the requests after it are held back at once,
// not sent in the outage's first second. A process that starts while
// embed jobs wait for the server (the worker finds them) calls it: each
// job it ran then sent its request in that second.
func (c *Client) AssumeDown() { c.down.assumeDown(time.Now()) }

// LastDown is when a request of this client last found the server down
// (Error.Unreachable; not one held back, which was not sent), zero while
// it does not count as down (a request was answered since). The worker
// wakes no embed job waiting for the server when it is later than the
// server's last answer (the extractor's LLM.Down): a time, not a bool,
// since that answer may have been another client's (enrich's query
// embedder), which does not end this client's outage.
func (c *Client) LastDown() time.Time {
	c.down.mu.Lock()
	defer c.down.mu.Unlock()
	return c.down.failedAt
}

// refuseDialTimeout bounds RefusesConnections' dial.
const refuseDialTimeout = time.Second

// RefusesConnections reports whether the embeddings server's address
// refuses a TCP connection now (one dial of at most a second; false when
// the requests go through a proxy: modelerr.RefusesConnections): a server
// down, restarting after a crash. The worker asks it before waking the
// embed jobs waiting for the server, as the extractor's
// LLM.RefusesConnections before waking extractions: LastDown counts only
// this client's requests, and a crash may have cut none of them (another
// serve's, or none in flight).
func (c *Client) RefusesConnections(ctx context.Context) bool {
	return modelerr.RefusesConnections(ctx, c.cfg.BaseURL, c.cfg.HTTPClient, 1, 0, refuseDialTimeout)
}

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
//
// A vector the server answered for a text that is unusable (a null,
// non-number or non-finite entry, or all zero) does not end the call: Embed
// returns the other texts' vectors, nil at those texts, with an *Error of
// KindPermanent whose Unusable lists them (UnusableOf). A model answers the
// same text the same way, so the text is not worth retrying at once. When
// every vector of a request of several texts is unusable, the server is at
// fault and the call ends with KindTransient.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if limit := c.cfg.InputSizes.Limit(); c.cfg.CutInputs && limit > 0 {
		cut := make([]string, len(texts))
		for i, t := range texts {
			cut[i] = cutTo(t, limit)
		}
		texts = cut
	}
	out := make([][]float32, 0, len(texts))
	var unusable []int
	dims := 0
	for start := 0; start < len(texts); start += c.cfg.BatchSize {
		batch := texts[start:min(start+c.cfg.BatchSize, len(texts))]
		vs, bad, err := c.request(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v == nil {
				continue
			}
			if dims != 0 && len(v) != dims {
				e := newError(KindTransient, "dimensions changed within one call from %d to %d", dims, len(v))
				e.MixedDims = true
				return nil, e
			}
			dims = len(v)
		}
		for _, i := range bad {
			unusable = append(unusable, start+i)
		}
		out = append(out, vs...)
	}
	if len(unusable) > 0 {
		e := newError(KindPermanent, "the server answered %d of %d texts with an unusable vector (null, non-number, non-finite or all zero)", len(unusable), len(texts))
		e.Unusable = unusable
		return out, e
	}
	return out, nil
}

// request sends one batch. The vectors of texts the server answered with
// an unusable vector (a null, non-number or non-finite entry, or all zero)
// are nil, and bad lists their indexes in batch; a reply whose every vector
// is unusable, of more than one text, is the server's failure, not the
// texts' (KindTransient).
func (c *Client) request(ctx context.Context, batch []string) (vs [][]float32, bad []int, err error) {
	if err := c.acquire(ctx); err != nil {
		// Nothing was sent: no text can be the cause.
		return nil, nil, &Error{Kind: KindTransient, Reason: "waiting to send: " + err.Error(), Err: err, NotSent: true}
	}
	defer func() { <-c.sem }()
	// Admitted once the slot is taken and before the turn under
	// RequestsPerSecond, as the extractor's: while the server counts as
	// down, one request probes it now and then and the others are held
	// back, unsent, at once.
	admitted := time.Now()
	probe, held := c.down.admit(admitted, c.cfg.MaxProbeGap)
	if held != nil {
		return nil, nil, held
	}
	if probe {
		// After the probe's outcome is noted (deferred below, so run
		// first): the next request admitted is told it.
		defer c.down.probeDone()
	}
	status := 0 // the reply's, once one came
	defer func() { c.note(ctx, err, status, probe, admitted) }()
	if err := c.waitTurn(ctx); err != nil {
		// Nothing was sent (a probe given up so is given back: note).
		return nil, nil, &Error{Kind: KindTransient, Reason: "waiting to send: " + err.Error(), Err: err, NotSent: true}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	body, err := json.Marshal(embeddingRequest{Input: batch, Model: c.cfg.Model, Dimensions: c.cfg.Dimensions})
	if err != nil {
		return nil, nil, newError(KindPermanent, "request rejected before sending: %s", short(err.Error()))
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, newError(KindPermanent, "request rejected before sending: %s", short(err.Error()))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	// The key sent, which a refusal may quote: the file may change
	// before the reply is read.
	sent := c.apiKey()
	if sent != "" {
		req.Header.Set("Authorization", "Bearer "+sent)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, nil, &Error{Kind: KindTransient, Reason: "request: " + ctx.Err().Error(), Err: ctx.Err()}
		case modelerr.NotConnected(err):
			e := newError(KindTransient, "connection error: %s", short(c.redact(err.Error(), sent)))
			e.NotSent, e.Unreachable = true, true
			return nil, nil, e
		case rctx.Err() != nil:
			return nil, nil, newError(KindTransient, "request timed out after %s", c.cfg.Timeout)
		}
		return nil, nil, newError(KindTransient, "connection error: %s", short(c.redact(err.Error(), sent)))
	}
	defer resp.Body.Close()
	status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		e := c.statusError(resp.StatusCode, resp.Header.Get("Retry-After"), msg, batch, sent)
		if len(batch) == 1 && RefusedInput(e) {
			// Alone, so refused for this text: maybe its length.
			c.cfg.InputSizes.noteRefused(len(batch[0]))
		}
		return nil, nil, e
	}
	var reply embeddingReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBytes)).Decode(&reply); err != nil {
		if ctx.Err() != nil {
			return nil, nil, &Error{Kind: KindTransient, Reason: "request: " + ctx.Err().Error(), Err: ctx.Err()}
		}
		if rctx.Err() != nil {
			return nil, nil, newError(KindTransient, "request timed out after %s", c.cfg.Timeout)
		}
		return nil, nil, newError(KindTransient, "malformed response with status %d: %s", resp.StatusCode, short(err.Error()))
	}
	if len(reply.Data) != len(batch) {
		return nil, nil, newError(KindTransient, "reply has %d vectors for %d inputs", len(reply.Data), len(batch))
	}
	vs = make([][]float32, len(batch))
	seen := make([]bool, len(batch))
	dims := 0
	for _, d := range reply.Data {
		if d.Index < 0 || d.Index >= len(batch) || seen[d.Index] {
			return nil, nil, newError(KindTransient, "reply has a bad or repeated index %d", d.Index)
		}
		seen[d.Index] = true
		if !d.Embedding.usable() {
			bad = append(bad, d.Index)
			continue
		}
		if dims != 0 && len(d.Embedding.v) != dims {
			e := newError(KindTransient, "reply mixes dimensions %d and %d", dims, len(d.Embedding.v))
			e.MixedDims = true
			return nil, nil, e
		}
		dims = len(d.Embedding.v)
		vs[d.Index] = d.Embedding.v
	}
	if len(bad) == len(batch) && len(batch) > 1 {
		return nil, nil, newError(KindTransient, "the server answered each of %d texts with an unusable vector (null, non-number, non-finite or all zero)", len(batch))
	}
	if want := c.cfg.Dimensions; want > 0 && dims > 0 && dims != want {
		// A server without "dimensions" (Ollama's, most local ones)
		// answers its model's own size: stored under the name of the
		// size asked (StoredModel), they would be mislabelled, and a
		// query of a server that does take it would not match them.
		e := newError(KindTransient, "the server answered vectors of %d dimensions where %d were asked (\"dimensions\"): it does not shorten vectors; ask without dimensions", dims, want)
		e.Unreachable, e.Misconfigured = true, true
		return nil, nil, e
	}
	if dims > 0 {
		c.dims.Store(int64(dims))
	}
	longest := 0
	for i, t := range batch {
		if vs[i] != nil {
			longest = max(longest, len(t))
		}
	}
	c.cfg.InputSizes.noteAccepted(longest)
	slices.Sort(bad)
	return vs, bad, nil
}

// statusError is the error of a reply with a failed status, quoting the
// server's own message, which says what a status alone does not (a bad
// key, a model to pull, the input's limit), without the batch's texts it
// may repeat (modelerr.HideEcho).
func (c *Client) statusError(status int, retryAfter string, body []byte, batch []string, sent string) *Error {
	e := newError(KindTransient, "status %d", status)
	if msg := modelerr.Message(body); msg != "" {
		e.Reason += ": " + modelerr.HideEcho(short(c.redact(msg, sent)), batch)
	}
	e.Status = status
	delay, hasDelay := modelerr.RetryAfter(retryAfter, time.Now())
	switch {
	case status == http.StatusTooManyRequests || (status == http.StatusServiceUnavailable && hasDelay):
		e.Kind, e.RetryAfter = KindRetryAfter, defaultRetryAfter
		if hasDelay {
			e.RetryAfter = min(delay, MaxRetryAfter)
		}
	case status == http.StatusUnauthorized || status == http.StatusNotFound:
		// The key, or the model or the base URL: every request fails
		// alike until an operator fixes it (a key rotated in
		// --embed-api-key-file, a model pulled). Before, a permanent
		// error: an embed job was cancelled for it, its items
		// lexical-only until the hourly sweep.
		e.Unreachable, e.Misconfigured = true, true
	case status == http.StatusForbidden && c.down.refused(batch):
		// A 403 to a request of none of these texts just before, none
		// answered between: the key's (outage.go, refused).
		e.Unreachable, e.Misconfigured = true, true
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout:
		e.Kind = KindPermanent
	case status == http.StatusInternalServerError && tooLarge(body):
		// llama.cpp's server answers an input over its physical batch
		// (-ub, 512 tokens by default) with a 500 saying so: no attempt
		// passes it, so it is the text's refusal, as a 400 over a
		// model's context. Before, it was retried as the server's
		// passing trouble, 10 attempts and every hourly sweep.
		e.Kind, e.tooLarge = KindPermanent, true
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		e.Unreachable = true
	}
	return e
}

// tooLarge reports whether an error reply's message is llama.cpp's for an
// input over its physical batch ("input is too large to process. increase
// the physical batch size", "input (600 tokens) is too large to process").
func tooLarge(body []byte) bool {
	return strings.Contains(strings.ToLower(modelerr.Message(body)), "too large to process")
}

// redact takes the API key, and anything shaped like one, out of text
// quoted from the server: a 401's message may echo the key sent, which
// is the key now unless the key file changed meanwhile.
func (c *Client) redact(s, sent string) string {
	for _, key := range []string{sent, c.apiKey()} {
		if key != "" {
			s = strings.ReplaceAll(s, key, "[redacted]")
		}
	}
	return keyLike.ReplaceAllString(s, "[redacted]")
}

// keyLike matches the API keys of OpenAI-style providers (sk-..., and the
// bearer tokens of a header quoted back).
var keyLike = regexp.MustCompile(`(?i)\b(sk-[A-Za-z0-9_*.\-]+|bearer\s+\S+)`)

// embeddingRequest is the body of POST /embeddings.
type embeddingRequest struct {
	Input []string `json:"input"`
	Model string   `json:"model"`
	// Dimensions is OpenAI's (text-embedding-3-*): left out when 0, as
	// most servers (Ollama, TEI, llama.cpp) know no such field.
	Dimensions int `json:"dimensions,omitempty"`
}

// embeddingReply is what is read of its reply.
type embeddingReply struct {
	Data []struct {
		Index     int        `json:"index"`
		Embedding jsonVector `json:"embedding"`
	} `json:"data"`
}

// jsonVector decodes a JSON array of numbers, noting what encoding/json
// would hide: a null entry (llama.cpp writes NaN as null) becomes 0 in a
// []float32.
type jsonVector struct {
	v   []float32
	bad bool // an entry that is null, not a number, or out of float32's range
}

// UnmarshalJSON reads the array; encoding/json has checked its syntax.
func (j *jsonVector) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		j.bad = true
		return nil
	}
	if len(b) < 2 || b[0] != '[' {
		return fmt.Errorf("embedding is not an array")
	}
	inner := bytes.TrimSpace(b[1 : len(b)-1])
	if len(inner) == 0 {
		return nil
	}
	j.v = make([]float32, 0, bytes.Count(inner, []byte(","))+1)
	for len(inner) > 0 {
		tok := inner
		if i := bytes.IndexByte(inner, ','); i >= 0 {
			tok, inner = inner[:i], inner[i+1:]
		} else {
			inner = nil
		}
		// A string, object or array entry fails ParseFloat too (any comma
		// inside it only splits it into more such tokens).
		x, err := strconv.ParseFloat(string(bytes.TrimSpace(tok)), 32)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			j.bad = true
			x = 0
		}
		j.v = append(j.v, float32(x))
	}
	return nil
}

// usable reports whether the vector can be stored and compared: not empty,
// every entry a finite number, and not all zero (which has no direction).
func (j jsonVector) usable() bool {
	if j.bad || len(j.v) == 0 {
		return false
	}
	for _, x := range j.v {
		if x != 0 {
			return true
		}
	}
	return false
}

// acquire takes a slot of MaxConcurrency (given back by the caller).
func (c *Client) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitTurn takes the next start under RequestsPerSecond and waits for it.
// After admission (downRow.admit), as the extractor's token is the last
// thing waited for: a request held back takes no turn, and does not wait
// for one to be told it is not sent.
func (c *Client) waitTurn(ctx context.Context) error {
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
			return ctx.Err()
		}
	}
	return nil
}

// short bounds quoted error text.
func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		return strings.ToValidUTF8(s[:200], "") + "…"
	}
	return s
}

// maxResponseBytes bounds a reply's body (2048 vectors of 4096 float32 as
// JSON fit); maxErrorBodyBytes an error reply's, of which only the message
// is quoted.
const (
	maxResponseBytes  = 256 << 20
	maxErrorBodyBytes = 64 << 10
)
