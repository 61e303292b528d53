package extractor

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/internal/modelerr"
	"github.com/memoryd/memoryd/internal/secretfile"
	"github.com/memoryd/memoryd/redact"
)

// Response formats for LLMConfig.ResponseFormat.
const (
	// ResponseFormatJSONSchema sends the reply's JSON schema
	// (response_format type "json_schema").
	ResponseFormatJSONSchema = "json_schema"
	// ResponseFormatJSONObject asks for any JSON object
	// (response_format type "json_object"), for servers without schemas.
	ResponseFormatJSONObject = "json_object"
	// ResponseFormatNone sends no response_format, for servers that reject
	// it; the prompt alone asks for JSON.
	ResponseFormatNone = "none"
)

const (
	defaultTimeout        = 60 * time.Second
	defaultMaxConcurrency = 4
	defaultMaxTokens      = 2048

	// maxResponseBytes bounds how much of a response body is read. A
	// successful response over it is a permanent error: the same request
	// would get the same reply (see errReplyTooLarge).
	maxResponseBytes = 4 << 20
	// maxErrorBodyBytes bounds the part of a response body kept to find
	// the error object a server may send with status 200.
	maxErrorBodyBytes = 64 << 10
	// maxDetailBytes bounds the server's error message quoted in errors.
	maxDetailBytes = 120
)

// LLMConfig configures [NewLLM]. Zero values mean the documented defaults.
type LLMConfig struct {
	// BaseURL is the OpenAI-compatible API base, e.g.
	// http://127.0.0.1:11434/v1 (Ollama) or https://api.openai.com/v1.
	// Required.
	BaseURL string
	// APIKey is sent as a bearer token. Optional: local servers need none.
	APIKey string
	// APIKeyFile names a file holding the API key (less a trailing line
	// break), in place of APIKey: read again when it changes, so that a
	// key rotated in the file is sent from the next request on, without a
	// restart. Optional.
	APIKeyFile string
	// Model is the model name, e.g. "gpt-4o-mini" or "qwen2.5:7b". Required.
	Model string
	// Timeout bounds each HTTP request. One call sends at most two (the
	// request and one correction), so its requests take at most
	// [LLM.CallTimeout], twice this; a caller's own deadline must leave room
	// for that (memoryd's worker refuses a job timeout that does not).
	// Default 60s.
	Timeout time.Duration
	// MaxConcurrency bounds the requests in flight across all Extract and
	// ExtractBatch calls of one LLM. Default 4.
	MaxConcurrency int
	// RequestsPerSecond limits the HTTP requests sent per second, across all Extract and ExtractBatch calls of one LLM (a
	// token bucket of Burst tokens). A request waits for a token, or until
	// its context ends. Default 0: unlimited.
	RequestsPerSecond float64
	// Burst is how many requests may be sent at once, after a quiet period,
	// under RequestsPerSecond. Default 1 when RequestsPerSecond is set;
	// ignored when it is 0.
	Burst int
	// ResponseFormat is ResponseFormatJSONSchema, ResponseFormatJSONObject
	// or ResponseFormatNone. Default ResponseFormatJSONSchema. Replies are
	// validated whatever the format.
	ResponseFormat string
	// Temperature is the sampling temperature, from 0 to 2. Default 0.
	//
	// go-openai leaves a zero temperature out of the request, and servers
	// then use their own default (often 0.7 to 1), so 0 is sent as the
	// smallest positive float32 instead, except for reasoning models, which
	// accept no temperature other than their default.
	Temperature float32
	// MaxTokens bounds the tokens the model may generate for one reply,
	// sent on every request as max_tokens (which Ollama, vLLM and
	// llama.cpp honour; Ollama ignores max_completion_tokens), or as
	// max_completion_tokens for the reasoning models that refuse max_tokens
	// (o1, o3, o4, gpt-5 and the like, as go-openai knows them). A reply cut
	// by the bound is not valid JSON and gets the one correction. Default
	// 2048: the reply to a batch of MaxBatchTurns turns fits, and a runaway
	// generation cannot spend more.
	MaxTokens int
	// MaxProbeGap is the longest time between two requests sent while the
	// model server counts as down (Error.Unreachable: not answering, or
	// refusing the key or model): the requests between fail at once with
	// the last one's error, unsent, and their callers wait as for it. Early
	// in an outage the gap is a quarter of the outage so far, so a blip
	// holds little back. Default 5s; negative sends every request.
	MaxProbeGap time.Duration
	// HTTPClient sends the requests. Default: a client with no timeout of
	// its own (Timeout applies per request).
	HTTPClient *http.Client
	// Logger receives diagnostics about the server's replies. Default
	// slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, gives each model call (a request and its
	// correction) a span, with the model, token counts and the kind of
	// failure but no prompt or reply text, and sends the W3C traceparent
	// header to the server. Default nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
}

// withDefaults returns a copy of c with zero fields set to their defaults.
func (c LLMConfig) withDefaults() LLMConfig {
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = defaultMaxConcurrency
	}
	if c.RequestsPerSecond > 0 && c.Burst == 0 {
		c.Burst = 1
	}
	if c.ResponseFormat == "" {
		c.ResponseFormat = ResponseFormatJSONSchema
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = defaultMaxTokens
	}
	if c.MaxProbeGap == 0 {
		c.MaxProbeGap = defaultMaxProbeGap
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate reports the first invalid field of a config with defaults
// applied.
func (c LLMConfig) validate() error {
	switch {
	case c.BaseURL == "":
		return errors.New("extractor: LLMConfig.BaseURL is required")
	case c.Model == "":
		return errors.New("extractor: LLMConfig.Model is required")
	case c.Timeout < 0:
		return errors.New("extractor: LLMConfig.Timeout must not be negative")
	case c.MaxConcurrency < 0:
		return errors.New("extractor: LLMConfig.MaxConcurrency must not be negative")
	case c.RequestsPerSecond < 0 || math.IsNaN(c.RequestsPerSecond) || math.IsInf(c.RequestsPerSecond, 0):
		return errors.New("extractor: LLMConfig.RequestsPerSecond must be a finite number, not negative")
	case c.Burst < 0:
		return errors.New("extractor: LLMConfig.Burst must not be negative")
	case c.Temperature < 0 || c.Temperature > 2 || math.IsNaN(float64(c.Temperature)):
		return errors.New("extractor: LLMConfig.Temperature must be between 0 and 2")
	case c.MaxTokens <= 0:
		return errors.New("extractor: LLMConfig.MaxTokens must be positive")
	case c.APIKey != "" && c.APIKeyFile != "":
		return errors.New("extractor: LLMConfig.APIKeyFile is set with APIKey; give one")
	}
	if err := CheckBaseURL(c.BaseURL); err != nil {
		return fmt.Errorf("extractor: LLMConfig.BaseURL %w", err)
	}
	if err := CheckResponseFormat(c.ResponseFormat); err != nil {
		return fmt.Errorf("extractor: LLMConfig.ResponseFormat %w", err)
	}
	if c.Temperature != 0 {
		// Fail at startup, not on every job, when go-openai would refuse
		// the request (reasoning models accept no temperature but 1).
		req := openai.ChatCompletionRequest{Model: c.Model, Temperature: c.Temperature}
		if err := openai.NewReasoningValidator().Validate(req); err != nil {
			return fmt.Errorf("extractor: LLMConfig.Temperature is not accepted for model %q: %w", c.Model, err)
		}
	}
	return nil
}

// CheckBaseURL says what is wrong with a model server's base URL (also an
// embeddings server's), or nil: it must be an absolute http or https URL.
func CheckBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL, e.g. http://localhost:11434/v1")
	}
	return nil
}

// CheckResponseFormat says what is wrong with a response format, or nil.
func CheckResponseFormat(f string) error {
	switch f {
	case ResponseFormatJSONSchema, ResponseFormatJSONObject, ResponseFormatNone:
		return nil
	}
	return fmt.Errorf("must be %q, %q or %q", ResponseFormatJSONSchema, ResponseFormatJSONObject, ResponseFormatNone)
}

// LLM extracts memory with a model behind an OpenAI-compatible
// chat-completions API. It is safe for concurrent use.
type LLM struct {
	cfg         LLMConfig
	keyFile     *secretfile.File // LLMConfig.APIKeyFile's, or nil
	client      *openai.Client
	format      *openai.ChatCompletionResponseFormat // of Extract
	batchFormat *openai.ChatCompletionResponseFormat // of ExtractBatch
	temperature float32
	// formatSteps counts the response formats the server refused to
	// Extract's requests (a 400 naming response_format): each steps every
	// later one down one, json_schema to json_object to none, for the
	// life of l. Replies are parsed alike whatever was asked (fences,
	// prose, reasoning around the JSON), so less constraint costs some
	// malformed replies where a refused format failed every turn for good
	// until an operator set --llm-response-format (a walk with a local
	// server: 12 of 12 failed). batchFormatSteps counts ExtractBatch's
	// apart (stepsOf): its schema is another (batchExtractionSchema, with
	// a "minimum" that some servers' schema compilers refuse, as vLLM's
	// xgrammar backend has number bounds), and a refusal of one schema
	// stepped the other's requests down too, for good, though the server
	// took it. A server refusing response_format whole refuses one
	// request of each.
	formatSteps, batchFormatSteps atomic.Int32

	// maxTokens and maxCompletionTokens: one of them is LLMConfig.MaxTokens
	// (see requestMaxTokens).
	maxTokens, maxCompletionTokens int

	sem chan struct{}
	// solo is held by a request gathering every slot of sem (Alone), so
	// that two such never hold part of them each; gathering is closed
	// when it has them all or gave up, and other requests wait for it
	// (acquire).
	solo      chan struct{}
	gathering atomic.Pointer[chan struct{}]
	bucket    *tokenBucket // nil when RequestsPerSecond is 0
	tracer    trace.Tracer // nil when LLMConfig.TracerProvider is
	usage     usageTracker
	// badUsage is set once a reply's token counts were negative, so that
	// the warning is logged once, not per request.
	badUsage atomic.Bool

	// serverErrors is the row of requests answered with a server error
	// (500 and the other 5xx that do not already say unreachable) since
	// one was last answered otherwise: see serverErrorsOutage.
	serverErrors serverErrorRow

	// pausedUntil is when requests may be sent again after a 429.
	pauseMu     sync.Mutex
	pausedUntil time.Time

	// Test hooks, nil in production. waitingForSlot, waitingForToken and
	// waitingForPause run when a request starts to wait for a concurrency
	// slot, a rate-limit token or the shared pause after a 429.
	waitingForSlot  func()
	waitingForToken func()
	waitingForPause func()
}

// NewLLM returns an LLM extractor. It fails when cfg is invalid, naming the
// field; it does not contact the server.
func NewLLM(cfg LLMConfig) (*LLM, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}

	keyFile, err := secretfile.Open(cfg.APIKeyFile, "llm api key", cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("extractor: LLMConfig.APIKeyFile: %w", err)
	}
	// With a key file go-openai gets no key, and the doer sets the header
	// from the file at each request.
	clientCfg := openai.DefaultConfig(cfg.APIKey)
	clientCfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	doer := recordingDoer{client: cfg.HTTPClient, key: keyFile}
	var tracer trace.Tracer
	if cfg.TracerProvider != nil {
		tracer = cfg.TracerProvider.Tracer("github.com/memoryd/memoryd/extractor")
		doer.propagate = true
	}
	clientCfg.HTTPClient = doer

	l := &LLM{
		cfg:         cfg,
		keyFile:     keyFile,
		client:      openai.NewClientWithConfig(clientCfg),
		temperature: requestTemperature(cfg.Model, cfg.Temperature),
		sem:         make(chan struct{}, cfg.MaxConcurrency),
		solo:        make(chan struct{}, 1),
		tracer:      tracer,
	}
	l.maxTokens, l.maxCompletionTokens = requestMaxTokens(cfg.Model, cfg.MaxTokens)
	if cfg.RequestsPerSecond > 0 {
		l.bucket = newTokenBucket(cfg.RequestsPerSecond, cfg.Burst, time.Now())
	}
	switch cfg.ResponseFormat {
	case ResponseFormatJSONSchema:
		l.format = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   "memory_extraction",
				Schema: json.RawMessage(extractionSchema),
				Strict: false, // see extractionSchema
			},
		}
		l.batchFormat = &openai.ChatCompletionResponseFormat{
			Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{
				Name:   "memory_extraction_batch",
				Schema: json.RawMessage(batchExtractionSchema),
				Strict: false, // see batchExtractionSchema
			},
		}
	case ResponseFormatJSONObject:
		l.format = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		l.batchFormat = l.format
	}
	return l, nil
}

// Info returns Info{Name: "llm", Model: cfg.Model, PromptVersion:
// LLMPromptVersion}.
func (l *LLM) Info() Info {
	return Info{Name: "llm", Model: l.cfg.Model, PromptVersion: LLMPromptVersion}
}

// Usage returns the requests sent and tokens used since l was created,
// keyed by model name (LLMConfig.Model, as requested), so that the totals of
// several LLMs can be merged by key. The map is a copy and never nil; a model
// appears once a request to it has been sent. Per-extraction usage is in
// [Result.Usage].
func (l *LLM) Usage() map[string]UsageTotals {
	return l.usage.snapshot()
}

// CallTimeout is the longest the requests of one Extract or ExtractBatch
// call can take: two requests (the request and one correction) of at most
// LLMConfig.Timeout each. Waits for a concurrency slot, a rate-limit token
// or a pause come on top; they end with the call's context.
func (l *LLM) CallTimeout() time.Duration {
	return 2 * l.cfg.Timeout
}

// Extract asks the model for the memory in in.Turn, in one attempt as
// described in the package documentation. The prompt (LLMPromptVersion)
// shows in.Facts with their values, those sharing words with the turn first
// and then in in.FactKeys' order, within a budget of about 600 tokens, and
// in.Prior as read-only context; the model replies with fact operations,
// resolved into Result.Facts and Result.Changes. Memory markers are
// stripped from every text before it is sent, and in.UserID is not sent. A
// turn whose user message is empty after stripping yields an empty Result
// without a request.
func (l *LLM) Extract(ctx context.Context, in Input) (Result, error) {
	turn := cleanTurn(in.Turn, promptMaxUserBytes, promptMaxAssistantBytes)
	if turn.UserMessage == "" {
		return Result{Facts: map[string]string{}}, nil
	}
	var (
		res     Result
		dropped []droppedKey
	)
	user, background := buildUserPrompt(in, turn)
	usage, err := l.ask(ctx, systemPrompt, user, background, l.format, invalidNote, func(reply string) error {
		var err error
		res, err = parseReply(reply, keepDropped(&dropped))
		return err
	})
	if err != nil {
		return Result{Usage: usage}, err
	}
	l.logDropped(ctx, dropped)
	res.Usage = usage
	return res, nil
}

// keepDropped returns a function that adds a dropped key to *keys.
func keepDropped(keys *[]droppedKey) func(droppedKey) {
	return func(k droppedKey) { *keys = append(*keys, k) }
}

// logDropped logs at debug each fact key of an accepted reply that was
// dropped as unusable (modelKey), with why: nothing else would tell a
// fact the model stated from one it never found. The key is quoted
// (bounded), never the value.
func (l *LLM) logDropped(ctx context.Context, keys []droppedKey) {
	for _, k := range keys {
		l.cfg.Logger.DebugContext(ctx, "model fact key dropped", "model", l.cfg.Model, "key", boundDetail(k.key), "reason", k.why)
	}
}

// ask sends the system and user prompts and returns once parse accepts the
// reply. When parse rejects it, the model is asked once more, with
// note(reason) appended to the user prompt: a correction within the same
// attempt, never a retry of a failed request. A second rejection fails with
// KindInvalidOutput; a failed request fails at once with its own kind. It
// returns the tokens of every completed request, also on error. Both Extract
// and ExtractBatch go through it, so they share limits and usage
// accounting.
func (l *LLM) ask(ctx context.Context, system, user string, background int, format *openai.ChatCompletionResponseFormat,
	note func(error) string, parse func(reply string) error) (usage Usage, err error) {
	if l.tracer != nil {
		var span trace.Span
		ctx, span = l.tracer.Start(ctx, "memoryd.llm.chat", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", l.cfg.Model)))
		defer func() {
			span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", usage.PromptTokens), attribute.Int("gen_ai.usage.output_tokens", usage.CompletionTokens))
			if err != nil {
				kind := KindOf(err).String()
				span.SetStatus(codes.Error, kind)
				span.SetAttributes(attribute.String("error.type", kind))
				if e := (*Error)(nil); errors.As(err, &e) && e.HeldBack {
					// No request left: the server counts as down.
					span.SetAttributes(attribute.Bool("memoryd.llm.held_back", true))
				}
			}
			span.End()
		}()
	}
	req := openai.ChatCompletionRequest{
		Model: l.cfg.Model,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: system},
			{Role: openai.ChatMessageRoleUser, Content: user},
		},
		Temperature:         l.temperature,
		MaxTokens:           l.maxTokens,
		MaxCompletionTokens: l.maxCompletionTokens,
	}

	const calls = 2     // the request and one correction
	tokenBound := false // a reply was cut at MaxTokens, or held only reasoning
	windowCut := 0      // tokens of a reply the server cut below MaxTokens
	// digest is of the request and the replies rejected
	// (Error.ReplyDigest); blank: a reply had no content to digest.
	digest, blank := newReplyDigest(req, background), false
	// shortest is the length of the shortest reply rejected (minSampledRepeat).
	shortest := math.MaxInt
	counter := l.stepsOf(format)
	for call := 1; ; call++ {
		steps := counter.Load()
		req.ResponseFormat = stepDown(format, steps)
		before := usage.CompletionTokens
		reply, cut, err := l.complete(ctx, req, &usage)
		var failed *Error
		if errors.As(err, &failed) && failed.formatRefused && req.ResponseFormat != nil {
			// Asked again at once with less, not counted as a call: a
			// step at most per format, so at most twice.
			l.stepFormat(counter, steps, req.ResponseFormat)
			call--
			continue
		}
		if failed != nil {
			return usage, err
		}
		if errors.Is(err, errReasoningOnly) {
			tokenBound = true
		}
		if err == nil { // else a reply without an answer, rejected like one parse rejects
			err = parse(reply)
		}
		if err == nil {
			return usage, nil
		}
		blank = blank || strings.TrimSpace(reply) == ""
		shortest = min(shortest, len(strings.TrimSpace(reply)))
		writeDigestPart(digest, formatName(req.ResponseFormat))
		writeDigestPart(digest, reply)
		if got := usage.CompletionTokens - before; cut && got > 0 && got < l.cfg.MaxTokens {
			// Stopped below the limit asked for: the server's context
			// window (prompt and reply) was full, as llama.cpp's server
			// without context shift stops. Raising MaxTokens would not help.
			err = fmt.Errorf("%w; the reply was cut after %d tokens, so keep it shorter", err, got)
			windowCut = got
		} else if cut {
			// Say so, in the error and to the model: a shorter reply fits.
			err = fmt.Errorf("%w; the reply was cut at the limit of %d tokens, so keep it shorter", err, l.cfg.MaxTokens)
			tokenBound = true
		}
		if call == calls {
			e := newError(KindInvalidOutput, "%v (after %d model calls)", err, call)
			if !blank && (req.Temperature == math.SmallestNonzeroFloat32 || shortest >= minSampledRepeat) {
				e.ReplyDigest = hex.EncodeToString(digest.Sum(nil)[:16])
			}
			// For the operator only (the log, memoryd failed), not the
			// model: the bounds are theirs to raise.
			if tokenBound {
				e.Reason += fmt.Sprintf("; the model ran into its token limit: raise --llm-max-tokens (now %d)", l.cfg.MaxTokens)
			}
			if windowCut > 0 {
				e.Reason += fmt.Sprintf("; the server cut a reply after %d tokens, below --llm-max-tokens (%d): its context window is likely full; raise the server's context size (Ollama: OLLAMA_CONTEXT_LENGTH; llama.cpp: --ctx-size, shared by its --parallel slots)", windowCut, l.cfg.MaxTokens)
			}
			return usage, e
		}
		// Replace rather than append a message: some chat templates reject
		// two user messages in a row.
		req.Messages[1].Content = user + note(err)
	}
}

// minSampledRepeat is the length in bytes below which replies sampled
// (a temperature above 0 in LLMConfig, or a reasoning model, asked at the
// server's default: requestTemperature) get no Error.ReplyDigest: a short
// reply, a canned refusal ("I'm sorry, but I can't help with that.", 38
// bytes), is the likeliest answer of a model that samples, so two
// attempts giving it byte for byte is chance as often as not, and failing
// the turn for good then took its later attempts, which may sample an
// answer. Greedy decoding (temperature 0, sent as the smallest float)
// answers a request one way, whatever the length; and a longer reply,
// some 50 tokens, repeated byte for byte with every reply of the call is
// no chance.
const minSampledRepeat = 200

// newReplyDigest starts the digest of a call's rejected replies
// (Error.ReplyDigest) with its request: the model, its sampling and token
// bounds (a job retried after --llm-model, LLMConfig.Temperature or
// --llm-max-tokens changed is asked another request, and the same replies
// then are no repeat), and the prompts, but for the first background bytes
// of the user prompt: the user's current facts and the conversation's
// earlier turns, shown read-only (writeBackground). They change between
// a turn's attempts as other turns are saved, and the same replies to the
// same turn and instructions with another background are the model's
// mistake repeated all the same: before, a fact saved between two
// attempts made an identical failure look new. Each reply is written with
// the response format it was asked with, so that a step down of the
// format (stepFormat) makes another request.
func newReplyDigest(req openai.ChatCompletionRequest, background int) hash.Hash {
	h := sha256.New()
	writeDigestPart(h, req.Model)
	writeDigestPart(h, strconv.FormatFloat(float64(req.Temperature), 'g', -1, 32))
	writeDigestPart(h, strconv.Itoa(req.MaxTokens))
	writeDigestPart(h, strconv.Itoa(req.MaxCompletionTokens))
	for i, m := range req.Messages {
		content := m.Content
		if i == len(req.Messages)-1 && m.Role == openai.ChatMessageRoleUser {
			content = content[min(background, len(content)):]
		}
		writeDigestPart(h, content)
	}
	return h
}

// formatName is the LLMConfig.ResponseFormat of a request's format.
func formatName(f *openai.ChatCompletionResponseFormat) string {
	if f == nil {
		return ResponseFormatNone
	}
	return string(f.Type)
}

// writeDigestPart writes part to h, its length first, so that no two
// lists of parts write the same bytes.
func writeDigestPart(h hash.Hash, part string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(part)))
	h.Write(n[:])
	h.Write([]byte(part))
}

// complete sends one request and returns the reply's content and whether
// the server cut it at the token limit, or an *Error saying what the
// failure means, or a plain error saying why a reply holds no answer (see
// replyContent). It adds the tokens of a completed request
// to usage, and every sent request to l's totals. A 429 (or a 503 with
// Retry-After) pauses all requests of l for its delay; while the server
// counts as down, only a probe now and then is sent, one at a time, and
// the others fail as the last request did (serverErrorRow.admit, in send).
func (l *LLM) complete(ctx context.Context, req openai.ChatCompletionRequest, usage *Usage) (string, bool, error) {
	resp, ex, err := l.send(ctx, req)
	if ex.slots > 0 {
		// Given back once the outcome is noted below: a request waiting
		// for the slot is admitted (admit) knowing whether this one found
		// the server down. Given back in send, before, the next could be
		// let through as this failure was being noted, and go beside a
		// probe.
		defer func() {
			for range ex.slots {
				<-l.sem
			}
		}()
	}
	if ex.probe {
		// After the probe's outcome is noted below: the next request
		// admitted is told it.
		defer l.serverErrors.probeDone()
	}
	promptTokens, completionTokens := l.tokens(req.Model, resp.Usage)
	var e *Error
	status := ex.status
	if err == nil && len(resp.Choices) == 0 {
		// A status 200 carrying an error object is the server's error, the
		// status its code says: counted, paused for and told as one.
		e, status = bodyError(ex)
	}
	if ex.sent {
		l.usage.record(req.Model, promptTokens, completionTokens, err == nil && e == nil, status)
	}
	if err == nil && e == nil {
		l.answered(true)
		usage.PromptTokens += promptTokens
		usage.CompletionTokens += completionTokens
		content, err := replyContent(resp)
		cut := len(resp.Choices) > 0 && resp.Choices[0].FinishReason == openai.FinishReasonLength
		return content, cut, err
	}
	if e == nil {
		var paused *Error
		if errors.As(err, &paused) {
			return "", false, paused // not sent: the LLM is paused past the call's deadline, or held back while the server is down (admit)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", false, ctxError("model request", ctxErr)
		}
		e = classify(err, ex, l.cfg.Timeout)
		if e.Kind == KindTransient && !e.Unreachable && ex.sent && status == 0 && !ex.timedOut && l.refusesConnections(ctx, crashDials) {
			e.Crashed = true
			e.Reason += "; the server then refused connections: it went down with this request in flight"
			// Down until its next answer (Down), though the error is the
			// request's (not Unreachable: an attempt spent, the crash
			// counted). Before, nothing counted it down until a request
			// met it refusing, and the worker's wakes that follow the
			// server's last answer brought the jobs waiting for it back
			// into the restart (a crash walk: 3 wakes of 44 jobs, each
			// refused, each wake counted toward the jobs' bound).
			l.serverErrors.crashed(time.Now())
		}
	}
	if status != 0 {
		// Only a server that answered quotes a message; a timeout or a
		// connection error (every request of an outage) holds none.
		e.Reason = hideEcho(e.Reason, req.Messages)
		e.Reason = hideKey(e.Reason, l.keyFile.ValueOr(l.cfg.APIKey))
		if ex.key != "" {
			e.Reason = hideKey(e.Reason, ex.key)
		}
	}
	e.formatRefused = refusesFormat(status, ex.body, req.ResponseFormat, req.Messages)
	l.noteServerError(e, status, ex, req.Messages)
	if e.Kind == KindRetryAfter {
		// Pause everyone: the server is telling this client, not this
		// call, to slow down.
		l.pauseUntil(time.Now().Add(e.RetryAfter))
	}
	return "", false, e
}

// stepDown is format after steps refusals: json_schema, then json_object,
// then none (nil).
func stepDown(format *openai.ChatCompletionResponseFormat, steps int32) *openai.ChatCompletionResponseFormat {
	switch {
	case format == nil || steps == 0:
		return format
	case steps == 1 && format.Type == openai.ChatCompletionResponseFormatTypeJSONSchema:
		return &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	}
	return nil
}

// stepsOf is the counter of the refused formats (formatSteps or
// batchFormatSteps) of the requests asking for format: ExtractBatch's when
// it asks for a format of its own (a schema), Extract's otherwise.
func (l *LLM) stepsOf(format *openai.ChatCompletionResponseFormat) *atomic.Int32 {
	if format != nil && format == l.batchFormat && format != l.format {
		return &l.batchFormatSteps
	}
	return &l.formatSteps
}

// stepFormat records that the server refused the format refused, asked
// after steps refusals counted by counter (stepsOf): later requests of
// the counter's, for the life of l, ask for less. Of requests refused at
// once, the first steps and logs; the others find it done.
func (l *LLM) stepFormat(counter *atomic.Int32, steps int32, refused *openai.ChatCompletionResponseFormat) {
	if !counter.CompareAndSwap(steps, steps+1) {
		return
	}
	next := ResponseFormatNone
	if refused.Type == openai.ChatCompletionResponseFormatTypeJSONSchema {
		next = ResponseFormatJSONObject
	}
	requests, hint := "single-turn", " (set --llm-response-format "+next+" to start so)"
	if counter == &l.batchFormatSteps {
		// The flag would take the schema from single-turn requests too,
		// which the server takes.
		requests, hint = "batch", " for batch requests; single-turn requests keep theirs"
	}
	l.cfg.Logger.Warn("the model server refused response_format "+string(refused.Type)+": asking with "+next+" from now on"+hint,
		"base_url", redactURL(l.cfg.BaseURL), "model", l.cfg.Model, "requests", requests)
}

// refusesFormat says whether a server that answered status (with body) to
// a request of msgs sent with format refused the format: a 400 whose body
// names response_format, json_schema or a JSON schema is a server without
// the response format asked for, or without the schema's features
// (llama.cpp's server before schemas, some gateways, a model of OpenAI's
// without json_schema, vLLM's "The provided JSON schema contains features
// not supported by xgrammar."), which the LLM asks again with less
// (stepFormat). Not where the body names it in the request's text it
// quotes (a user writing about response_format), nor in the request it
// echoes (requestEchoes: vLLM's validation errors quote the request
// whole, response_format and all, as their "input"), nor in a context
// window exceeded (OpenAI counts "N in the response_format schemas"): a
// step is for every later request, and those 400s are the one turn's.
func refusesFormat(status int, body []byte, format *openai.ChatCompletionResponseFormat, msgs []openai.ChatCompletionMessage) bool {
	if status != http.StatusBadRequest || format == nil {
		return false
	}
	b := strings.ToLower(hideEcho(serverWords(body, newFormatEcho(format)), msgs))
	for _, window := range []string{"context_length", "context length", "context window", "context size"} {
		if strings.Contains(b, window) {
			return false
		}
	}
	for _, named := range []string{"response_format", "response format", "json_schema", "json schema"} {
		if strings.Contains(b, named) {
			return true
		}
	}
	return false
}

// serverWords is the text of an error body less the request it echoes: of
// a JSON body, its keys and strings, but for the values of "input" members
// (FastAPI's validation errors as JSON), the "input" of the Python
// reprs of validation errors a string holds (vLLM's message: "1
// validation error:\n  {'type': ..., 'loc': ('body',), 'msg': ...,
// 'input': {'model': ..., 'response_format': {...}}}"), and any value
// that echo says is the request's, with its key (a gateway's "request",
// "body" or "original_request", the format alone, the request's JSON as a
// string); of another body (or one cut short at maxErrorBodyBytes),
// everything before the first "input". A server's own words come before
// the echo in both forms.
func serverWords(body []byte, echo formatEcho) string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		s := string(body)
		for _, key := range []string{`'input':`, `"input":`} {
			if i := strings.Index(s, key); i >= 0 {
				s = s[:i]
			}
		}
		return s
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			b.WriteString(withoutReprInputs(v))
			b.WriteByte('\n')
		case []any:
			for _, e := range v {
				if !echo.of(e) {
					walk(e)
				}
			}
		case map[string]any:
			for k, e := range v {
				if k != "input" && !echo.of(e) {
					b.WriteString(k + "\n")
					walk(e)
				}
			}
		}
	}
	if !echo.of(v) {
		walk(v)
	}
	return b.String()
}

// formatEcho tells the values of an error body that echo the request
// refused, by its response format: a 400 quoting the request (a gateway's
// validation error, under whatever key) names the format there whatever
// it refuses, and a step down is for good (refusesFormat).
type formatEcho struct {
	// exact holds the compact JSON (keys sorted) of the format, its
	// json_schema and its schema; squeezed the same, and as sent, without
	// white space, for a string holding the request's JSON
	// (re-serialised).
	exact    map[string]bool
	squeezed []string
}

func newFormatEcho(format *openai.ChatCompletionResponseFormat) formatEcho {
	e := formatEcho{exact: map[string]bool{}}
	add := func(v any) {
		if b, err := json.Marshal(v); err == nil {
			if s, ok := compactJSON(b); ok {
				// As sent (the schema's keys in its own order) and as
				// sorted: a gateway may re-serialise either.
				e.exact[s] = true
				e.squeezed = append(e.squeezed, squeeze(string(b)), squeeze(s))
			}
		}
	}
	if format != nil {
		add(format)
		if format.JSONSchema != nil {
			add(format.JSONSchema)
			if format.JSONSchema.Schema != nil {
				add(format.JSONSchema.Schema)
			}
		}
	}
	return e
}

// of reports whether v (decoded JSON) is the request's: a string holding
// the request's JSON (the format's beside its "messages", or a string
// that is JSON holding the format); an object or
// array equal to the format, its json_schema or its schema; or an object
// with "messages" whose "response_format" holds one of them (the request,
// echoed whole). Not a server's own message quoting the format it refuses,
// nor its error object holding that format beside the message: those are
// its words (only the member holding the format is left out, as equal to
// it).
func (e formatEcho) of(v any) bool {
	if len(e.exact) == 0 {
		return false
	}
	switch v := v.(type) {
	case string:
		s := squeeze(v)
		if !strings.Contains(s, `"messages":`) && !jsonText(v) {
			return false // prose: a server's words, even quoting the format
		}
		for _, n := range e.squeezed {
			if strings.Contains(s, n) {
				return true
			}
		}
	case []any:
		return e.exact[compactValue(v)]
	case map[string]any:
		if e.exact[compactValue(v)] {
			return true
		}
		request := false
		for k := range v {
			request = request || strings.EqualFold(k, "messages")
		}
		if !request {
			return false
		}
		for k, f := range v {
			if !strings.EqualFold(k, "response_format") {
				continue
			}
			s := compactValue(f)
			for n := range e.exact {
				if strings.Contains(s, n) {
					return true
				}
			}
		}
	}
	return false
}

// jsonText reports whether s is the JSON text of an object or an array
// (a request serialised into a string), not prose.
func jsonText(s string) bool {
	s = strings.TrimSpace(s)
	return (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) && json.Valid([]byte(s))
}

// compactJSON is b (JSON) decoded and encoded again: compact, object keys
// sorted, HTML characters unescaped, as compactValue writes a value.
func compactJSON(b []byte) (string, bool) {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return "", false
	}
	return compactValue(v), true
}

func compactValue(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// squeeze is s without white space.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// withoutReprInputs is s less the value of each 'input' member of the
// Python dict reprs it holds (pydantic's validation errors as vLLM quotes
// them), balanced over brackets and quoted strings; one that never ends
// runs to the end of s.
func withoutReprInputs(s string) string {
	const key = "'input':"
	var b strings.Builder
	for {
		i := strings.Index(s, key)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i+len(key):]
		s = s[reprValueEnd(s):]
	}
}

// reprValueEnd is the byte length of the Python value at the start of s
// (after spaces), up to the comma, closing bracket or line break that ends
// it outside brackets and quoted strings, or len(s).
func reprValueEnd(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			if depth == 0 {
				return i
			}
			depth--
		case ',', '\n':
			if depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// serverErrorsOutage is how many different requests in a row, of any
// jobs, answered with a server error (or timed out: noteServerError)
// make the next ones count as the
// server being down (Error.Unreachable): a model server or the gateway
// before it answering 500 while it restarts fails every request alike, as
// a 503 does, and with attempts spent on it every turn of a 30-second
// outage failed (a lifecycle probe: 96 turns failed in a 60-second one).
// Different: one turn's request that makes the server fail, sent again
// and again with nothing else in between (a quiet system), is that turn's
// failure and spends its attempts (a review: counted as an outage, it
// waited --llm-max-outage, 30 minutes, instead of failing in 30 s). A
// row older than serverErrorsWindow starts again.
const (
	serverErrorsOutage = 3
	serverErrorsWindow = 5 * time.Minute
)

// serverErrorRow is the current row of server errors: the different
// requests in it and when the last came, and whether the server is taken
// for down. Safe for concurrent use: each method decides under one lock.
type serverErrorRow struct {
	mu       sync.Mutex
	requests map[[32]byte]bool
	last     time.Time
	// answered is when a request was last answered otherwise (answer).
	answered time.Time
	// downSince is when the server was taken for down (an error marked
	// Unreachable), zero while it is not: the first reply after it says
	// the outage ended (answer).
	downSince time.Time
	// assumed is when the row was made an outage without a failure of its
	// own (assumeDown), zero when it was not or a request was answered
	// since: a server error or timeout within serverErrorsWindow of it is
	// the outage going on.
	assumed time.Time
	// prober dates the last probe (admit), or when the server was taken
	// for down, and holds whether that probe is in flight (until
	// probeDone): the next one waits for its outcome, however long the
	// gap has been. Without that, with requests that time out (a hung
	// server) and --llm-timeout over the gap, a probe left every gap and
	// they filled every request slot, as many as before the probing.
	prober modelerr.Prober
	// downErr is the error of the last request that found the server down
	// (remember): what a request held back (admit) is told.
	downErr Error
	// downBefore is how long the server counts as down before downSince
	// when admit holds requests back: modelerr.MinHoldBack in an outage assumed
	// (goDown), else 0.
	downBefore time.Duration
}

// defaultMaxProbeGap is LLMConfig.MaxProbeGap's default: a server back up
// is used again within it.
const defaultMaxProbeGap = 5 * time.Second

// admit decides whether a request may be sent at now. While the server
// counts as down (downSince is set), from its first second on, one
// request is let through at most every gap (a quarter of the outage so
// far, at most maxGap), and only when the one before has ended
// (probeDone), to probe it, and the others get the error that found it
// down without being sent (modelerr.HoldBack; scripted replies in tests
// are sent as they come in the first second):
// every request failed alike, and each waiting job asking for itself sent
// thousands (a rotation walk: 4,660 requests refused for a revoked key in
// 100 s at 8 turns/s; one process's jobs re-asking a server that is
// loading a model, or that hangs and holds a slot for --llm-timeout
// each). probe reports that the request let through is a probe: the
// caller calls probeDone once its outcome is noted. A nil error means
// send.
func (r *serverErrorRow) admit(now time.Time, maxGap time.Duration) (probe bool, held *Error) {
	if maxGap < 0 {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.downSince.IsZero() || !r.downErr.Unreachable {
		// Not down, or its error not kept yet (remember runs just after
		// failed, under the lock again): sent rather than told nothing.
		return false, nil
	}
	probe, hold, probeIn := r.prober.Admit(now, now.Sub(r.downSince)+r.downBefore, maxGap)
	if !hold {
		return probe, nil
	}
	e := r.downErr
	e.Err, e.HeldBack, e.ProbeIn = nil, true, probeIn
	e.Reason = modelerr.HeldReason("the model server", e.Misconfigured, r.downSince, maxGap, r.downErr.Reason)
	return false, &e
}

// probeDone ends the probe admit let through: the next may be sent.
func (r *serverErrorRow) probeDone() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prober.Done()
}

// remember keeps e, the error of a request that found the server down,
// for the requests admit holds back: the requests of other users' jobs.
// So the server's message is kept only for a refusal of the configuration
// (the key, the model: "invalid api key", "model not found, try pulling
// it"); of any other failure only its kind and status ("status 500",
// "connection error"), since a server error may quote that request's
// input in words the echo check does not catch.
func (r *serverErrorRow) remember(e *Error) {
	reason := e.Reason
	if !e.Misconfigured {
		reason, _, _ = strings.Cut(reason, ": ")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downErr = Error{Kind: e.Kind, Reason: reason, Unreachable: e.Unreachable, Misconfigured: e.Misconfigured}
}

// failed records a request of msgs, sent at started, that failed at now:
// unreachable when it found the server down by itself (no connection, a
// 502, a 503), else with a server error, or timed out (timeout), or
// refused (a 403: refused). It reports whether the server now counts as
// down. A timeout while another request was answered (after this one was
// sent) is not counted. An assumed outage (assumeDown) makes a server
// error or a timeout one at once, not a refusal: one request's 403 (a
// moderation) is that request's.
func (r *serverErrorRow) failed(msgs []openai.ChatCompletionMessage, started, now time.Time, timeout, unreachable, refused bool) bool {
	var key [32]byte
	if !unreachable {
		h := sha256.New()
		for _, m := range msgs {
			h.Write([]byte(m.Role))
			h.Write([]byte{0})
			h.Write([]byte(m.Content))
			h.Write([]byte{0})
		}
		h.Sum(key[:0])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !unreachable {
		if timeout && r.answered.After(started) {
			return false
		}
		if !refused && r.assumedAt(now) {
			r.goDown(now)
			return true
		}
		if r.requests == nil || now.Sub(r.last) > serverErrorsWindow {
			r.requests = map[[32]byte]bool{}
		}
		r.last = now
		if len(r.requests) < serverErrorsOutage {
			r.requests[key] = true
		}
		if len(r.requests) < serverErrorsOutage {
			return false
		}
	}
	r.goDown(now)
	return true
}

// assumedAt reports whether the row is an outage assumed (assumeDown)
// within serverErrorsWindow of now. Under r.mu.
func (r *serverErrorRow) assumedAt(now time.Time) bool {
	return !r.assumed.IsZero() && now.Sub(r.assumed) <= serverErrorsWindow
}

// goDown takes the server for down from now, unless it already is. Under
// r.mu. In an outage assumed (other processes' jobs wait for the server),
// requests are held back at once (downBefore): the outage is not a blip
// starting, and a serve restarted in one sent every request of its first
// second (11 in a walk with the key refused).
func (r *serverErrorRow) goDown(now time.Time) {
	if !r.downSince.IsZero() {
		return
	}
	r.downSince = now
	r.prober.Start(now)
	r.downBefore = 0
	if r.assumedAt(now) {
		r.downBefore = modelerr.MinHoldBack
	}
}

// crashed takes the server for down from now, unless it already is: a
// request was cut and its address then refused connections
// (Error.Crashed). Requests are still sent as usual (no error is kept for
// admit to hold them back with) until one finds the server down by
// itself (failed); an answer ends it (answer).
func (r *serverErrorRow) crashed(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.goDown(now)
}

// assumeDown makes the row an outage from now: a server error or timeout
// within serverErrorsWindow counts as the server being down (failed), and
// an answer ends it. The server counts as down from that failure, not from
// now (an answer first logs no outage).
func (r *serverErrorRow) assumeDown(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assumed = now
}

// answer ends the row: a request was answered otherwise, at now. A reply
// (replied: a completion, or a refusal of the request itself, not a 429
// or a 503 asking to wait) also ends the server's being down: it returns
// for how long it was, once, 0 when it was not.
func (r *serverErrorRow) answer(now time.Time, replied bool) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = nil
	r.answered = now
	r.assumed = time.Time{}
	if !replied || r.downSince.IsZero() {
		return 0
	}
	down := max(now.Sub(r.downSince), time.Nanosecond)
	r.downSince = time.Time{}
	// The next outage's requests are held back with its own error, not
	// this one's (a key refused long ago: misconfigured).
	r.downErr = Error{}
	return down
}

// noteServerError records e, the error of a request of msgs answered with
// status (or timed out: ex), in the row when it is a server error or a
// timeout, and marks it Unreachable once the row is an outage; any other
// answer ends the row. A timeout is counted as a server error: a server
// that hangs (a stuck process, a gateway holding connections to a dead
// backend) answers no request, and with attempts spent on each timeout a
// hang of a few minutes failed every turn it met (an operator's probe:
// attempt 4 of 5 after 90 s with --llm-timeout 3s).
//
// A timeout while another request was answered (an answer after this one
// was sent, before it timed out) is not counted: the server is not hung but
// slow on this request (a long prompt on a model on CPU answers the short
// ones beside it), which is this request's failure. A gateway's 504 is a
// timeout too: its own (nginx's default proxy_read_timeout is 60 s, as
// --llm-timeout), on the model behind it.
func (l *LLM) noteServerError(e *Error, status int, ex *exchange, msgs []openai.ChatCompletionMessage) {
	switch {
	case e.Unreachable:
		l.serverErrors.failed(msgs, ex.started, time.Now(), false, true, false)
	case (status >= 500 || ex.timedOut) && e.Kind == KindTransient:
		e.Unreachable = l.serverErrors.failed(msgs, ex.started, time.Now(), timedOut(status, ex), false, false)
	case status == http.StatusForbidden:
		// A key without the right, or one request refused (OpenRouter's
		// moderation, a firewall before a gateway: a review). One 403 is
		// that request's refusal; the third of different requests in a
		// row, none answered between, is the configuration, waited for
		// as a 401 is.
		if l.serverErrors.failed(msgs, ex.started, time.Now(), false, false, true) {
			e.Kind, e.Unreachable, e.Misconfigured = KindTransient, true, true
		}
	case status != 0:
		l.answered(e.Kind != KindRetryAfter)
	}
	if e.Unreachable {
		l.serverErrors.remember(e)
	}
}

// AssumeDown counts the model server as down from now, as if three
// different requests in a row had just failed with a server error: its
// next server error (500) or timeout within 5 minutes is Unreachable,
// until a request is answered otherwise (a 403 is not: it is counted as
// ever). A process that starts during an outage other processes saw (the
// worker finds jobs waiting for it) calls it: the row is the process's
// own, so a new process spent attempts on its first requests until it
// had seen three fail, and a job whose attempt was spent, retried first,
// lost one at every restart (a retries walk: 2 of 10 turns failed across
// 4 restarts in a 43-second outage with --max-attempts 3).
func (l *LLM) AssumeDown() { l.serverErrors.assumeDown(time.Now()) }

// Down reports whether the server counts as down now: an error taken it
// for down (Error.Unreachable), or a request it went down with
// (Error.Crashed), came after its last answer, which ends its being down.
// The worker wakes no job waiting for it then.
func (l *LLM) Down() bool {
	l.serverErrors.mu.Lock()
	defer l.serverErrors.mu.Unlock()
	return !l.serverErrors.downSince.IsZero()
}

// answered ends the row of server errors: a request was answered (replied:
// see serverErrorRow.answer). The first reply after the server was taken
// for down says so, once: the waits' warnings are held back and then at
// debug (worker), and without it an operator reading the log after an
// outage does not see it end. At info after an outage of at least
// outageTold; a shorter one (a lone 502 from a gateway under load, a few
// 500s in a row) at debug, since such blips can come every few seconds.
func (l *LLM) answered(replied bool) {
	down := l.serverErrors.answer(time.Now(), replied)
	if down == 0 {
		return
	}
	level := slog.LevelDebug
	if down >= outageTold {
		level = slog.LevelInfo
	}
	l.cfg.Logger.Log(context.Background(), level, "model server answering again", "base_url", redactURL(l.cfg.BaseURL),
		"down_for", down.Round(time.Millisecond).String())
}

// outageTold is the shortest outage whose end is logged at info: the
// worker holds back its warnings of a model server that is down to one
// every 30 s (worker.OutageRepeats).
const outageTold = 30 * time.Second

// tokens returns the token counts of a reply's usage block. A negative count
// is not a count (a server bug): it is taken as unknown, 0, so that it can
// neither be stored nor lower the totals, and a warning is logged the first
// time.
func (l *LLM) tokens(model string, u openai.Usage) (prompt, completion int) {
	if u.PromptTokens >= 0 && u.CompletionTokens >= 0 {
		return u.PromptTokens, u.CompletionTokens
	}
	if l.badUsage.CompareAndSwap(false, true) {
		l.cfg.Logger.Warn("model server reported negative token counts; counting them as 0 (logged once)",
			"model", model, "prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens)
	}
	return max(u.PromptTokens, 0), max(u.CompletionTokens, 0)
}

// send makes one HTTP request while holding a concurrency slot (complete
// gives it back: ex.slots), once any
// shared pause after a 429 is over and a rate-limit token is taken. The
// token is the last thing waited for, so that requests leave at the
// limiter's pace. It returns an *Error of KindRetryAfter, without sending,
// when the pause would not leave the request time to complete before ctx's
// deadline.
func (l *LLM) send(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, *exchange, error) {
	ex := &exchange{}
	slots, err := l.acquire(ctx)
	if err != nil {
		return openai.ChatCompletionResponse{}, ex, err
	}
	ex.slots = slots // given back by complete
	// Admitted once the slot is taken, not before: a request that waited
	// for a slot behind ones that found the server down (timeouts of a
	// hung server, each holding a slot for --llm-timeout) is held back
	// like the others.
	probe, held := l.serverErrors.admit(time.Now(), l.cfg.MaxProbeGap)
	if held != nil {
		return openai.ChatCompletionResponse{}, ex, held
	}
	ex.probe = probe
	for {
		if err := l.waitPause(ctx); err != nil {
			return openai.ChatCompletionResponse{}, ex, err
		}
		if err := l.waitToken(ctx); err != nil {
			return openai.ChatCompletionResponse{}, ex, err
		}
		if l.pauseLeft(time.Now()) == 0 {
			break
		}
		// A 429 arrived while waiting for the token.
		if l.bucket != nil {
			l.bucket.refund()
		}
	}

	ex.started = time.Now()
	reqCtx, cancel := context.WithTimeout(context.WithValue(ctx, exchangeKey{}, ex), l.cfg.Timeout)
	defer cancel()
	resp, err := l.client.CreateChatCompletion(reqCtx, req)
	if err != nil && ctx.Err() == nil && errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		ex.timedOut = true
	}
	return resp, ex, err
}

// acquire takes a concurrency slot, giving up when ctx ends. When ctx has
// a deadline, it waits only while a request would still have its Timeout
// before it: past that it returns an *Error of KindRetryAfter (see
// queueContext), so that a job queued behind busy slots is scheduled again
// rather than timed out and charged an attempt for a request it never sent.
//
// A request of a context marked Alone takes every slot: no other request
// of this client is in flight while it is. It returns how many slots it
// took.
func (l *LLM) acquire(ctx context.Context) (int, error) {
	if alone(ctx) {
		return l.acquireAll(ctx)
	}
	gate := l.gathering.Load()
	if gate == nil {
		select {
		case l.sem <- struct{}{}:
			return 1, nil
		default:
		}
	}
	if l.waitingForSlot != nil {
		l.waitingForSlot()
	}
	qctx, cancel := l.queueContext(ctx)
	defer cancel()
	if gate != nil {
		// Behind the request gathering every slot, not beside it: one
		// taken as it frees would leave the gatherer waiting, the slots
		// it holds idle, for as long as requests keep coming.
		select {
		case <-*gate:
		case <-qctx.Done():
			return 0, l.queueError(ctx, fmt.Sprintf("all %d model request slots (the concurrency limit) stayed busy behind a request sent alone", cap(l.sem)))
		}
	}
	select {
	case l.sem <- struct{}{}:
		return 1, nil
	case <-qctx.Done():
		return 0, l.queueError(ctx, fmt.Sprintf("all %d model request slots (the concurrency limit) stayed busy", cap(l.sem)))
	}
}

// acquireAll takes every concurrency slot (acquire, for a request sent
// alone), waiting for the requests in flight to end, within the bound
// acquire waits.
func (l *LLM) acquireAll(ctx context.Context) (int, error) {
	qctx, cancel := l.queueContext(ctx)
	defer cancel()
	busy := func(n int) (int, error) {
		for range n {
			<-l.sem
		}
		return 0, l.queueError(ctx, fmt.Sprintf("the %d model request slots (the concurrency limit) did not all come free for a request sent alone", cap(l.sem)))
	}
	select {
	case l.solo <- struct{}{}:
	case <-qctx.Done():
		return busy(0)
	}
	defer func() { <-l.solo }()
	gate := make(chan struct{})
	l.gathering.Store(&gate)
	defer func() {
		l.gathering.Store(nil)
		close(gate)
	}()
	for n := range cap(l.sem) {
		select {
		case l.sem <- struct{}{}:
		case <-qctx.Done():
			return busy(n)
		}
	}
	return cap(l.sem), nil
}

// queueContext bounds a wait for this client's own limits (a slot, a rate
// token) to ctx's deadline less Timeout: a request that starts later could
// not finish.
func (l *LLM) queueContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, deadline.Add(-l.cfg.Timeout))
	}
	return context.WithCancel(ctx)
}

// queueError is the error of a wait queueContext ended: ctx's own when it
// ended, else an *Error of KindRetryAfter of one Timeout (about when a busy
// slot frees) saying what stayed busy.
func (l *LLM) queueError(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return &Error{Kind: KindRetryAfter, RetryAfter: min(l.cfg.Timeout, MaxRetryAfter), Local: true,
		Reason: what + " until too close to the call's deadline"}
}

// replyContent returns the text of the first choice. A refusal or a content
// filter is permanent: the same input would be refused again. A reply
// without an answer (no choices, or only reasoning_content) is a plain error
// naming why, rejected as invalid output by the caller like an empty reply.
func replyContent(resp openai.ChatCompletionResponse) (string, error) {
	if len(resp.Choices) == 0 {
		return "", errors.New("reply has no choices")
	}
	choice := resp.Choices[0]
	if choice.Message.Refusal != "" || choice.FinishReason == openai.FinishReasonContentFilter {
		return "", newError(KindPermanent, "model refused the input (finish reason %q)", choice.FinishReason)
	}
	content := choice.Message.Content
	if content == "" {
		content = textParts(choice.Message.MultiContent)
	}
	if strings.TrimSpace(content) == "" && strings.TrimSpace(choice.Message.ReasoningContent) != "" {
		return "", errReasoningOnly
	}
	if strings.TrimSpace(content) == "" && (len(choice.Message.ToolCalls) > 0 || choice.Message.FunctionCall != nil) {
		return "", errToolCallsOnly
	}
	return content, nil
}

// textParts joins the text parts of a content written as an array of parts
// (some servers and gateways always answer so; Mistral's reasoning models
// put a "thinking" part before the "text"): the answer is in those, the
// other parts (thinking, images) are not.
func textParts(parts []openai.ChatMessagePart) string {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == openai.ChatMessagePartTypeText || p.Type == "" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// errToolCallsOnly is the error of a reply that calls tools instead of
// answering: memoryd offers none, so the model (or a server's tool parser
// reading its JSON as a call) answered in the wrong place.
var errToolCallsOnly = errors.New("reply holds only tool_calls, no content (memoryd offers no tools)")

// errReasoningOnly is the error of a reply whose tokens went to reasoning
// (reasoning_content) and that holds no answer: the model spent its token
// limit thinking.
var errReasoningOnly = errors.New("reply holds only reasoning (reasoning_content), no answer")

// bodyError returns the error of a status 200 reply whose body carries an
// error object (some proxies and gateways send one), classified as its code
// says (a 429 pauses like one, with the reply's Retry-After), else as
// transient, and the status it stands for (its code, else 200); nil when
// the body holds none.
func bodyError(ex *exchange) (*Error, int) {
	msg, code, ok := errorObject(ex.body)
	if !ok {
		return nil, ex.status
	}
	if code == 0 {
		return newError(KindTransient, "status 200 with an error%s", msg), ex.status
	}
	return statusError(code, msg, ex.retryAfter), code
}

// errorObject reads the error object of a status 200 body: its message (as
// ": message", bounded, or "") and its code when that is an HTTP error
// status (else 0). It reports false when the body holds none.
func errorObject(body []byte) (detail string, code int, ok bool) {
	var top struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &top) != nil || len(top.Error) == 0 || isNull(top.Error) {
		return "", 0, false
	}
	var obj struct {
		Message string          `json:"message"`
		Code    json.RawMessage `json:"code"`
	}
	if firstByte(top.Error) == '{' && json.Unmarshal(top.Error, &obj) == nil {
		var n int
		if json.Unmarshal(obj.Code, &n) == nil && n >= 400 && n <= 599 {
			code = n
		}
		return messageDetail(obj.Message), code, true
	}
	var msg string
	if json.Unmarshal(top.Error, &msg) == nil {
		return messageDetail(msg), 0, true
	}
	return "", 0, true
}

// serverMessage is ": " and the message of an error body in the forms
// servers use (modelerr.Message), bounded and redacted, or "".
func serverMessage(body []byte) string { return messageDetail(modelerr.Message(body)) }

// messageDetail is ": " and a server's message, bounded and redacted, or ""
// for an empty one.
func messageDetail(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return ""
	}
	msg, _ = redact.Text(msg) // a server may echo what it was sent
	return ": " + boundDetail(msg)
}

// HTTPStatus is the HTTP status a model server answered a request of this
// package's client with, as err reports it; 0 when it did not answer (no
// connection, a timeout) or err is not such an error.
func HTTPStatus(err error) int {
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
	)
	switch {
	case errors.As(err, &reqErr):
		// First: go-openai wraps an empty *APIError in it (see classify).
		return reqErr.HTTPStatusCode
	case errors.As(err, &apiErr):
		return apiErr.HTTPStatusCode
	}
	return 0
}

// classify says what a failed request means for a later attempt, with a
// short lowercase reason without the response body.
func classify(err error, ex *exchange, timeout time.Duration) *Error {
	var (
		apiErr *openai.APIError
		reqErr *openai.RequestError
		status int
		detail string
	)
	switch {
	case errors.As(err, &reqErr):
		// First: go-openai wraps a half-decoded, empty *APIError in it
		// when "error" is a string.
		status = reqErr.HTTPStatusCode
		detail = serverMessage(reqErr.Body)
	case errors.As(err, &apiErr):
		status = apiErr.HTTPStatusCode
		detail = messageDetail(apiErr.Message)
	}
	if status == 0 && ex.status >= 400 {
		status = ex.status // the error body could not even be read
	}

	switch {
	case ex.timedOut:
		// Named for the operator: a model slower than the timeout on every
		// reply fails every turn, logged as the server unreachable; so do
		// requests queued in a server that runs fewer at once than
		// --llm-concurrency (Ollama's OLLAMA_NUM_PARALLEL), their timeout
		// running while they wait.
		return newError(KindTransient, "request timed out after %s (--llm-timeout: raise it for a slower model, --job-timeout above twice it; a server running fewer requests at once than --llm-concurrency queues the rest, their timeout running)", timeout)
	case ex.tooLarge && status == 0:
		// Transient, not permanent: a sampled model that ran away (a
		// repetition loop) answers normally the next time; the turn's
		// attempts bound it.
		return newError(KindTransient, "reply over %d bytes (status %d)", maxResponseBytes, ex.status)
	case status != 0:
		return statusError(status, detail, ex.retryAfter)
	case !ex.sent:
		// go-openai refused to build or send the request (unsupported
		// model or parameters): sending it again cannot help.
		return newError(KindPermanent, "request rejected before sending: %s", boundDetail(err.Error()))
	case ex.status != 0:
		return newError(KindTransient, "malformed response body with status %d: %s%s", ex.status, boundDetail(err.Error()), bodyHint(ex.contentType))
	default:
		// No response. Only when no connection could be made (refused, a
		// name that does not resolve, no route) is the server down or
		// restarting for everyone; a connection reset or closed after it
		// was made may be this request's doing (a server that crashes on
		// one input), which must spend attempts, not wait for an outage.
		e := newError(KindTransient, "connection error: %s", boundDetail(err.Error()))
		e.Unreachable = modelerr.NotConnected(err)
		return e
	}
}

// timedOut reports whether a request that got status timed out: this
// client's timeout (also after the headers came: a server or gateway that
// sends them at once, then the body when the reply is done), or a
// gateway's (504).
func timedOut(status int, ex *exchange) bool {
	return status == http.StatusGatewayTimeout || ex.timedOut
}

// statusError classifies an HTTP error status, detail being ": message" or
// "" and retryAfter the Retry-After header. A 502, or a 503 without
// Retry-After, says that the model server is down, restarting or loading a
// model (Error.Unreachable). A 504 is a gateway's timeout, which may be the
// request's doing (a long prompt on a slow model): like this client's own
// timeouts it counts as the server down only as the third of different
// requests in a row (noteServerError).
func statusError(status int, detail, retryAfter string) *Error {
	e := newError(KindTransient, "status %d%s", status, detail)
	delay, hasDelay := modelerr.RetryAfter(retryAfter, time.Now())
	switch {
	case status == http.StatusTooManyRequests || (status == http.StatusServiceUnavailable && hasDelay):
		e.Kind, e.RetryAfter = KindRetryAfter, defaultRetryAfter
		if hasDelay {
			e.RetryAfter = min(delay, MaxRetryAfter)
		}
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable:
		e.Unreachable = true
	case status == http.StatusUnauthorized || status == http.StatusNotFound:
		// The key, or the model or the base URL: every request fails
		// alike until an operator fixes it (an LLM walk: a key rotated
		// failed every turn for good, each waiting for retry-failed). A
		// 403 may be one request's (a moderation refusal): noteServerError.
		e.Unreachable, e.Misconfigured = true, true
	case refusal(status):
		e.Kind = KindPermanent
	}
	return e
}

// refusal reports whether status is the server refusing the request: a
// 4xx but 408 (its own timeout) and 429 (a rate limit).
func refusal(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// hideEcho replaces in reason (an error quoting a server's message) the
// runs of the request's text that the server repeated
// (modelerr.HideEcho), looking in its messages other than the system
// prompt, which hold the turns.
func hideEcho(reason string, msgs []openai.ChatCompletionMessage) string {
	var texts []string
	for _, m := range msgs {
		if m.Role == openai.ChatMessageRoleSystem {
			continue
		}
		texts = append(texts, m.Content)
		for _, part := range m.MultiContent {
			texts = append(texts, part.Text)
		}
	}
	return modelerr.HideEcho(reason, texts)
}

// hideKey replaces in reason (an error quoting a server's message) the
// configured API key, which a server refusing it may quote back ("invalid
// key: ..."), whatever its shape (redact.Text knows vendors' keys by
// theirs; a self-hosted server's may be any string), and the start of it
// that a bounded message ends with ("…"). The embeddings client does the
// same (embedding.Client.redact).
func hideKey(reason, key string) string {
	const mark = "[redacted:api_key]"
	if key == "" {
		return reason
	}
	if len(key) < minHiddenKeyBytes {
		// A placeholder ("x", "no"): only where it stands alone, not in
		// every word holding its letters ("max_tokens").
		return replaceToken(reason, key, mark)
	}
	reason = strings.ReplaceAll(reason, key, mark)
	if body, ok := strings.CutSuffix(reason, "…"); ok {
		for n := min(len(key)-1, len(body)); n >= 4; n-- {
			if strings.HasSuffix(body, key[:n]) {
				return body[:len(body)-n] + mark + "…"
			}
		}
	}
	return reason
}

// minHiddenKeyBytes is the shortest API key hideKey replaces wherever it
// occurs; a shorter one is replaced where it stands alone (replaceToken).
const minHiddenKeyBytes = 8

// replaceToken replaces in s the occurrences of tok that no letter or
// digit adjoins.
func replaceToken(s, tok, with string) string {
	alnum := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	var b strings.Builder
	for {
		i := strings.Index(s, tok)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(tok):])
		b.WriteString(s[:i])
		if (i == 0 || !alnum(before)) && (i+len(tok) == len(s) || !alnum(after)) {
			b.WriteString(with)
		} else {
			b.WriteString(tok)
		}
		s = s[i+len(tok):]
	}
}

// quotedError is err with a message safe to log (a server's words bounded
// and redacted); errors.As and HTTPStatus still see err.
type quotedError struct {
	msg string
	err error
}

func (e *quotedError) Error() string { return e.msg }
func (e *quotedError) Unwrap() error { return e.err }

// boundDetail keeps quoted server text short and printable.
func boundDetail(s string) string {
	s = strings.Join(strings.Fields(sanitize(s)), " ")
	if cut, ok := truncateUTF8(s, maxDetailBytes); ok {
		return cut + "…"
	}
	return s
}

// requestTemperature works around go-openai's omitempty on temperature: an
// explicit 0 would be dropped and the server's default used. The smallest
// positive float32 is, for sampling, the same as 0. Reasoning models reject
// any temperature, so for them 0 is left out as go-openai would.
func requestTemperature(model string, t float32) float32 {
	if t != 0 {
		return t
	}
	req := openai.ChatCompletionRequest{Model: model, Temperature: math.SmallestNonzeroFloat32}
	if openai.NewReasoningValidator().Validate(req) != nil {
		return 0
	}
	return math.SmallestNonzeroFloat32
}

// requestMaxTokens returns the bound on a reply's tokens as max_tokens, the
// field OpenAI-compatible servers honour, unless go-openai refuses it for
// the model (OpenAI's reasoning models): then as max_completion_tokens.
func requestMaxTokens(model string, n int) (maxTokens, maxCompletionTokens int) {
	req := openai.ChatCompletionRequest{Model: model, MaxTokens: n}
	if openai.NewReasoningValidator().Validate(req) != nil {
		return 0, n
	}
	return n, 0
}

// exchangeKey is the context key of the *exchange of one request.
type exchangeKey struct{}

// exchange records what happened on the wire during one request: go-openai
// returns errors without the response headers, and Retry-After is needed.
// It is written and read by the goroutine making the request.
type exchange struct {
	sent bool
	// slots: the concurrency slots the request holds (every one when
	// sent Alone), which the caller gives back. probe: it was let through
	// to probe a server that counts as down (serverErrorRow.admit), sent
	// or not.
	slots      int
	probe      bool
	status     int
	retryAfter string
	timedOut   bool
	// started is when the request was sent (its Timeout began).
	started time.Time
	// tooLarge: the body went on past maxResponseBytes.
	tooLarge bool
	// body is the start of the response body, at most maxErrorBodyBytes.
	body []byte
	// contentType is the response's Content-Type header.
	contentType string
	// key is the API key the request carried when it came from
	// LLMConfig.APIKeyFile: the file may have changed since, and the
	// server's reply may quote the key sent.
	key string
}

// bodyHint says what a body that is no chat completion most likely is, by
// its Content-Type: an HTML page is a base URL of a web UI or site, not the
// API (every turn fails the same way); an event stream is a gateway that
// streams whatever the request asked.
func bodyHint(contentType string) string {
	mt, _, _ := strings.Cut(strings.ToLower(contentType), ";")
	switch strings.TrimSpace(mt) {
	case "text/html":
		return " (the server answered an HTML page, not the API: is the base URL the API's, often ending in /v1?)"
	case "text/event-stream":
		return " (the server streamed its reply, text/event-stream, though the request asked for none: turn streaming off in the gateway or proxy)"
	}
	return ""
}

// recordingDoer is the go-openai HTTP client. It records the exchange of
// each request in the request's context and bounds response bodies. It
// sends each request once: go-openai (v1.43) has no retries, and net/http
// re-sends only idempotent requests, never these POSTs.
type recordingDoer struct {
	client *http.Client
	// key, when set, is the API key's file: its value now is the
	// request's bearer token.
	key *secretfile.File
	// propagate sends the traceparent of the request's span (tracing on).
	propagate bool
}

func (d recordingDoer) Do(req *http.Request) (*http.Response, error) {
	if d.propagate {
		propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(req.Header))
	}
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex != nil {
		ex.sent = true
	}
	if d.key != nil {
		key := d.key.Value()
		req.Header.Set("Authorization", "Bearer "+key)
		if ex != nil {
			ex.key = key
		}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return resp, err
	}
	if ex == nil {
		ex = &exchange{}
	}
	ex.status = resp.StatusCode
	ex.retryAfter = resp.Header.Get("Retry-After")
	ex.contentType = resp.Header.Get("Content-Type")
	resp.Body = &limitedBody{body: resp.Body, left: maxResponseBytes, ex: ex}
	return resp, nil
}

// errReplyTooLarge ends the read of a body past maxResponseBytes: cut
// there, it would only fail to decode, as if the server had sent broken
// JSON.
var errReplyTooLarge = fmt.Errorf("response body over %d bytes", maxResponseBytes)

// limitedBody reads at most maxResponseBytes of a body, recording in the
// exchange whether there was more and the start of what was read.
type limitedBody struct {
	body io.ReadCloser
	left int64
	ex   *exchange
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// Past the limit: a body that ends exactly there is whole.
		var probe [1]byte
		if n, _ := io.ReadFull(b.body, probe[:]); n > 0 {
			b.ex.tooLarge = true
			return 0, errReplyTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	if keep := min(n, maxErrorBodyBytes-len(b.ex.body)); keep > 0 {
		b.ex.body = append(b.ex.body, p[:keep]...)
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

// Ping checks that the model server answers, by listing its models (one
// request, bounded by ctx and Timeout, not retried). It is for start-up
// diagnostics; extraction does not depend on it.
func (l *LLM) Ping(ctx context.Context) error {
	_, err := l.Models(ctx)
	return err
}

// Models lists the ids of the models the server says it serves (GET
// /models: one request, bounded by ctx and Timeout, not retried), in its
// order; its error is Ping's. For start-up diagnostics: a server may serve
// a model it does not list (an alias), so a model missing from the list is
// a doubt, not an error.
func (l *LLM) Models(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	list, err := l.client.ListModels(ctx)
	if err != nil {
		// go-openai's error quotes the server's message whole: bounded and
		// redacted as an extraction's is, since start-up logs it.
		msg, _ := redact.Text(err.Error())
		msg = hideKey(boundDetail(msg), l.keyFile.ValueOr(l.cfg.APIKey))
		return nil, &quotedError{msg: fmt.Sprintf("llm server at %s: %s", redactURL(l.cfg.BaseURL), msg), err: err}
	}
	ids := make([]string, 0, len(list.Models))
	for _, m := range list.Models {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// ListsModel reports whether ids (Models) name model: the same id, or
// the same but for Ollama's ":latest" tag, which it lists and serves a
// name without a tag as.
func ListsModel(ids []string, model string) bool {
	base := strings.TrimSuffix(model, ":latest")
	for _, id := range ids {
		if id == model || strings.TrimSuffix(id, ":latest") == base {
			return true
		}
	}
	return false
}

// SameNameModels returns the ids among ids whose name before the tag (":")
// is model's, in any case: the tags of the model a server serves, for a
// model named with another tag or none (Ollama's "qwen3" is
// "qwen3:latest", where "qwen3:8b" may be the one pulled).
func SameNameModels(ids []string, model string) []string {
	name, _, _ := strings.Cut(model, ":")
	var same []string
	for _, id := range ids {
		if n, _, _ := strings.Cut(id, ":"); strings.EqualFold(n, name) {
			same = append(same, id)
		}
	}
	return same
}

// redactURL is u with any password masked: a base URL may carry
// credentials, and errors end up in logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}
