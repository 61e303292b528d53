// Package proxy is an OpenAI-compatible HTTP endpoint with memory, in front
// of any OpenAI-compatible upstream: POST /v1/chat/completions enriches the
// last user message with the user's memory (over NATS, events.Client)
// before forwarding it, streams the reply through as it arrives, and
// publishes the finished turn to the turn stream (events.Publisher);
// GET /v1/models is passed through. The user is the one the client's API
// key stands for (or, only when configured, a trusted gateway's header),
// never a field of the body.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/bodytime"
	"github.com/memoryd/memoryd/internal/httperrlog"
	"github.com/memoryd/memoryd/internal/secretfile"
)

// Defaults of Config.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultEnrichBudget    = 300 * time.Millisecond
	DefaultUpstreamTimeout = 2 * time.Minute
	DefaultUpstreamIdle    = 5 * time.Minute
	DefaultMaxBodyBytes    = 8 << 20
	// DefaultClientIdle bounds how long a client's keep-alive connection
	// may sit idle between requests (net/http keeps one forever without it).
	DefaultClientIdle = 2 * time.Minute
	// DefaultBodyTimeout bounds reading a request's body: 8 MiB in it is
	// 140 KB/s, slower than any client the proxy serves by design.
	DefaultBodyTimeout     = time.Minute
	DefaultPublishAttempts = 3
	DefaultPublishTimeout  = 5 * time.Second
)

// MemoryHeader set to "off" (or false, 0, no; any case) opts a request out
// of memory (no enrich, no turn published), as does the body field
// "memory": false; "on" (true, 1, yes) is the default, and another value a
// 400, as is the header sent more than once.
const MemoryHeader = "X-Memory"

// Realm is the realm of the WWW-Authenticate challenge of a 401: Bearer
// realm="memoryd proxy", with error="invalid_token" when the request sent
// a bearer token the keys do not know.
const Realm = "memoryd proxy"

// Keys maps an API key to the user it stands for (apikeys.Set).
type Keys interface {
	Lookup(key string) (userID string, ok bool)
}

// Observer is told what the proxy does, for metrics. Its methods must be
// quick and safe for concurrent use; the composition root implements it
// (the command passes Prometheus metrics), so the proxy knows no metrics
// library.
type Observer interface {
	// Request is one finished request: endpoint "chat" or "models", and its
	// outcome (see the Outcome constants).
	Request(endpoint, outcome string)
	// Enriched is a chat request's memory step and how long it took:
	// "enriched" (an injection was added), "empty" (memory had nothing),
	// "degraded" (memoryd answered degraded), "failed" (no answer within
	// the budget, or an error), or "skipped" (memory off, or no user text).
	Enriched(outcome string, took time.Duration)
	// Upstream is how long the upstream took to answer with its response
	// headers (the stream that follows is not counted), and the status
	// class: "2xx", "4xx", "5xx", ..., or "error" when it did not answer.
	Upstream(took time.Duration, class string)
	// TurnPublished is a turn published to the stream (true) or given up
	// on after the bounded attempts (false).
	TurnPublished(ok bool)
}

// Request outcomes Observer.Request reports.
const (
	OutcomeOK                  = "ok"                   // the upstream's 2xx reply relayed whole
	OutcomeUpstreamStatus      = "upstream_status"      // the upstream's non-2xx reply relayed
	OutcomeUpstreamTimeout     = "upstream_timeout"     // 504: no response headers within UpstreamTimeout
	OutcomeUpstreamUnreachable = "upstream_unreachable" // 502
	OutcomeUnauthorized        = "unauthorized"         // 401: no or unknown key
	OutcomeBadRequest          = "bad_request"          // 400, 408 or 413: refused before forwarding
	OutcomeCut                 = "cut"                  // the client went away, or the upstream's body broke off
	OutcomeUpstreamStalled     = "upstream_stalled"     // the upstream's body sent nothing for UpstreamIdle: cut
	// OutcomeUpstreamStreamError: the upstream's 2xx stream, relayed
	// whole, carried an error event (or a data event that is not JSON),
	// which the client's SDK fails on: the user saw an error.
	OutcomeUpstreamStreamError = "upstream_stream_error"
)

// Outcomes are the outcomes Observer.Request reports, so that a metrics
// layer can show each at 0 before it first happens.
func Outcomes() []string {
	return []string{OutcomeOK, OutcomeUpstreamStatus, OutcomeUpstreamTimeout, OutcomeUpstreamUnreachable,
		OutcomeUnauthorized, OutcomeBadRequest, OutcomeCut, OutcomeUpstreamStalled, OutcomeUpstreamStreamError}
}

// Endpoints are the endpoints Observer.Request reports.
func Endpoints() []string { return []string{"chat", "models"} }

// Outcomes of Observer.Enriched.
const (
	EnrichOutcomeEnriched = "enriched" // an injection added
	EnrichOutcomeEmpty    = "empty"    // memory answered with nothing to inject
	EnrichOutcomeDegraded = "degraded" // memoryd answered degraded: forwarded unenriched
	EnrichOutcomeFailed   = "failed"   // no answer within EnrichBudget, or an error
	EnrichOutcomeSkipped  = "skipped"  // memory off for the request, or no text to enrich
)

// EnrichOutcomes are the outcomes Observer.Enriched reports.
func EnrichOutcomes() []string {
	return []string{EnrichOutcomeEnriched, EnrichOutcomeEmpty, EnrichOutcomeDegraded, EnrichOutcomeFailed, EnrichOutcomeSkipped}
}

// Config configures a Proxy.
type Config struct {
	// Upstream is the OpenAI-compatible base URL requests are forwarded to,
	// e.g. http://127.0.0.1:11434/v1 (paths /chat/completions and /models
	// are appended). Required.
	Upstream string
	// UpstreamKey is sent to the upstream as its bearer token
	// (Authorization: Bearer), or in UpstreamKeyHeader; the client's
	// memoryd key never is. Empty: none.
	UpstreamKey string
	// UpstreamKeyFile names a file holding the upstream's key (less a
	// trailing line break), in place of UpstreamKey: read again when it
	// changes, so that a key rotated in the file is sent from the next
	// request on, without a restart. Optional.
	UpstreamKeyFile string
	// UpstreamKeyHeader, when set, is the header UpstreamKey is sent in,
	// as it is, rather than Authorization: Bearer: "api-key" for Azure
	// OpenAI's key authentication.
	UpstreamKeyHeader string
	// Listen is the address Start listens on. Default DefaultListen.
	Listen string
	// Keys authenticates clients. Required unless TrustedUserHeader is set.
	Keys Keys
	// TrustedUserHeader, when set, names a header a trusted gateway in
	// front of the proxy sets to the user id; a request carrying it is that
	// user without a key. Off by default: anyone who can reach the proxy
	// could set it.
	TrustedUserHeader string
	// Conn is the NATS connection enrich and publish use. Required.
	Conn *nats.Conn
	// Prefix is the subject prefix. Default events.DefaultPrefix.
	Prefix string
	// EnrichFormat is the injection format, events.FormatInline (default),
	// FormatSystem or FormatMarkdown; the injection is appended to the last
	// user message whatever the format.
	EnrichFormat string
	// EnrichBudget bounds the enrich request; past it the request is
	// forwarded unenriched. Default DefaultEnrichBudget.
	EnrichBudget time.Duration
	// UpstreamTimeout bounds the wait for the upstream's response headers
	// (not the streaming of the body), as the default Transport's
	// ResponseHeaderTimeout: a Transport of the caller's bounds it itself.
	// Default DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// UpstreamIdle bounds each wait for more of the upstream's response
	// body once its headers came (a stream's next chunk, the rest of a
	// reply). Past it the upstream request is cancelled and the client's
	// response is cut as for a body that broke off (the status was sent
	// already); no turn is published. Generous, since a reasoning model may
	// think for minutes between chunks. Default DefaultUpstreamIdle.
	UpstreamIdle time.Duration
	// MaxBodyBytes bounds a request body. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ClientIdle closes a client's keep-alive connection idle this long
	// between requests, so that connections opened once (with a key or
	// without: /healthz needs none) cannot pile up until the process runs
	// out of file descriptors. Default DefaultClientIdle.
	ClientIdle time.Duration
	// BodyTimeout bounds reading a request's body, from its headers to its
	// end. A client that sends it slower is answered 408: without it a
	// client holding a key could hold requests open without end by sending
	// their bodies a byte at a time (ReadHeaderTimeout covers only the
	// headers, ClientIdle only the waits between requests). Default
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// PublishAttempts and PublishTimeout bound publishing a turn.
	// Defaults DefaultPublishAttempts and DefaultPublishTimeout.
	PublishAttempts int
	PublishTimeout  time.Duration
	// Observer is told about requests, enrich, the upstream and published
	// turns. Default none.
	Observer Observer
	// Metrics, when set, is served at GET /metrics on the proxy's listener,
	// without a key (like the metrics of other OpenAI-compatible servers):
	// it must hold no user data. Default none.
	Metrics http.Handler
	// Transport carries upstream requests. Default a clone of
	// http.DefaultTransport with UpstreamTimeout as its
	// ResponseHeaderTimeout, keeping as many idle connections to the
	// upstream as it keeps in all (100).
	Transport http.RoundTripper
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider, when set, gives each chat request a span that
	// continues the client's trace (its traceparent header) and carries it
	// to the enrich request, the upstream request and the published turn.
	// Default nil: no tracing, at no cost; a client's own traceparent is
	// then forwarded upstream untouched, like its other headers.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() Config {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.EnrichFormat == "" {
		c.EnrichFormat = events.FormatInline
	}
	if c.EnrichBudget == 0 {
		c.EnrichBudget = DefaultEnrichBudget
	}
	if c.UpstreamTimeout == 0 {
		c.UpstreamTimeout = DefaultUpstreamTimeout
	}
	if c.ClientIdle == 0 {
		c.ClientIdle = DefaultClientIdle
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.UpstreamIdle == 0 {
		c.UpstreamIdle = DefaultUpstreamIdle
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.PublishAttempts == 0 {
		c.PublishAttempts = DefaultPublishAttempts
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

type nopObserver struct{}

func (nopObserver) Request(string, string)         {}
func (nopObserver) Enriched(string, time.Duration) {}
func (nopObserver) Upstream(time.Duration, string) {}
func (nopObserver) TurnPublished(bool)             {}

func (c Config) validate() error {
	u, err := url.Parse(c.Upstream)
	switch {
	case c.Upstream == "":
		return errors.New("proxy: Upstream is required (the OpenAI-compatible base URL)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("proxy: Upstream %q is not an http(s) URL", c.Upstream)
	case c.Keys == nil && c.TrustedUserHeader == "":
		return errors.New("proxy: Keys is required unless TrustedUserHeader is set (no way to know the user)")
	case c.Conn == nil:
		return errors.New("proxy: Conn is required")
	case c.UpstreamKey != "" && c.UpstreamKeyFile != "":
		return errors.New("proxy: UpstreamKeyFile is set with UpstreamKey; give one")
	case c.UpstreamKeyHeader != "" && !httpguts.ValidHeaderFieldName(c.UpstreamKeyHeader):
		return fmt.Errorf("proxy: UpstreamKeyHeader %q is not a header name", c.UpstreamKeyHeader)
	case c.EnrichFormat != events.FormatInline && c.EnrichFormat != events.FormatSystem && c.EnrichFormat != events.FormatMarkdown:
		return fmt.Errorf("proxy: EnrichFormat %q is not inline, system or markdown", c.EnrichFormat)
	case c.EnrichBudget < 0 || c.UpstreamTimeout < 0 || c.UpstreamIdle < 0 || c.ClientIdle < 0 || c.BodyTimeout < 0 || c.MaxBodyBytes < 0 || c.PublishAttempts < 0 || c.PublishTimeout < 0:
		return errors.New("proxy: EnrichBudget, UpstreamTimeout, UpstreamIdle, ClientIdle, BodyTimeout, MaxBodyBytes, PublishAttempts and PublishTimeout must not be negative")
	}
	return nil
}

// Proxy is the HTTP endpoint. Handler serves it on any server; Start and
// Stop run it on Config.Listen.
type Proxy struct {
	cfg      Config
	keyFile  *secretfile.File // Config.UpstreamKeyFile's, or nil
	upstream string           // Config.Upstream without its query and trailing "/"
	query    string           // its query, without the "?"
	client   *http.Client
	memory   *events.Client
	pub      *events.Publisher
	log      *slog.Logger
	obs      Observer
	tracer   trace.Tracer // nil when Config.TracerProvider is

	// publishes tracks the turns being published, so that Stop waits for
	// them; it is added to under mu, and not once halted is set (Stop
	// past its deadline: no turn is published from then on).
	publishes sync.WaitGroup
	mu        sync.Mutex
	halted    bool

	srv      *http.Server
	ln       net.Listener
	done     chan error   // Serve's end (Done)
	inFlight atomic.Int64 // requests being served (Start's server), counted for Stop's error
}

// ErrRequestsCut is in Stop's error when it cut requests in flight at its
// deadline: a stop that ended what it had to, not a failure of what it
// kept (memoryd proxy logs it and exits 0, as serve does).
var ErrRequestsCut = errors.New("requests still in flight were cut")

// New checks cfg and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = cfg.UpstreamTimeout
		// One host, the upstream: the default's 2 idle connections per
		// host had most concurrent chats open a connection (a TLS
		// handshake) each (TestUpstreamConnectionsAreReused).
		t.MaxIdleConnsPerHost = t.MaxIdleConns
		tr = t
	}
	keyFile, err := secretfile.Open(cfg.UpstreamKeyFile, "upstream key", cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("proxy: UpstreamKeyFile: %w", err)
	}
	// A query (Azure OpenAI's ?api-version=) goes after each endpoint's
	// path, not before it.
	base, query, _ := strings.Cut(cfg.Upstream, "?")
	p := &Proxy{
		cfg:      cfg,
		keyFile:  keyFile,
		upstream: strings.TrimSuffix(base, "/"),
		query:    query,
		// Redirects are the client's to follow, not the proxy's: following
		// one would resend the upstream key to wherever it points.
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		memory: events.NewClient(cfg.Conn, cfg.Prefix),
		pub:    events.NewPublisher(js, cfg.Prefix),
		log:    cfg.Logger,
		obs:    cfg.Observer,
	}
	if cfg.TracerProvider != nil {
		p.tracer = cfg.TracerProvider.Tracer("github.com/memoryd/memoryd/proxy")
	}
	return p, nil
}

// Handler is the proxy's HTTP handler.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", p.chat)
	mux.HandleFunc("GET /v1/models", p.models)
	mux.HandleFunc("GET /v1/models/{model...}", p.models)
	if p.cfg.Metrics != nil {
		mux.Handle("GET /metrics", p.cfg.Metrics)
	}
	// Probes, without a key as /metrics: the process is up; it can reach
	// memoryd (its NATS connection is up). The upstream is not probed: a
	// probe must not spend the model server's requests.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !p.cfg.Conn.IsConnected() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"nats": "not connected: " + p.cfg.Conn.Status().String()})
			return
		}
		// Connected as the client knows it: a round trip tells a server
		// that stopped answering (hung, or a lost host) before the
		// connection's pings drop it (a dependency walk).
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := p.memory.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"nats": "connected, but the server does not answer: " + err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"nats": "ok"})
	})
	served := "POST /v1/chat/completions, GET /v1/models, /healthz and /readyz"
	if p.cfg.Metrics != nil {
		served = "POST /v1/chat/completions, GET /v1/models, GET /metrics, /healthz and /readyz"
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := fmt.Sprintf("memoryd proxy serves %s, not %s %s", served, r.Method, r.URL.Path)
		// An app configured with the proxy's address but without /v1 (an
		// OpenAI SDK's base URL is http://HOST/v1) asks for /chat/completions:
		// say so, rather than leave the newcomer to compare the paths.
		if path := r.URL.Path; path == "/chat/completions" || path == "/models" || strings.HasPrefix(path, "/models/") {
			msg += ": the app's OpenAI base URL must end in /v1 (http://" + r.Host + "/v1)"
		}
		// The Vercel AI SDK's openai(model) calls the Responses API since
		// its version 5 (the default provider's): such an app reaches the
		// proxy only through the Chat Completions API, which it must choose.
		if path := r.URL.Path; path == "/v1/responses" || strings.HasPrefix(path, "/v1/responses/") || path == "/responses" {
			msg += ": the proxy speaks the Chat Completions API only; have the app use it (the Vercel AI SDK: openai.chat(model), not openai(model), or @ai-sdk/openai-compatible)"
		} else if strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/v1/chat/") && !strings.HasPrefix(path, "/v1/models") {
			// The rest of the OpenAI API (embeddings, completions, audio,
			// files ...) has nothing to remember: the app calls the
			// upstream for it, as the README says.
			msg += ": call the upstream's own base URL for the rest of the OpenAI API"
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", msg)
	})
	return bodytime.Bound(p.cfg.BodyTimeout, mux)
}

// Start listens on Config.Listen and serves in the background.
func (p *Proxy) Start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", p.cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy: listen: %w", err)
	}
	p.ln = ln
	h := p.Handler()
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: p.cfg.ClientIdle, ErrorLog: httperrlog.New(p.log), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	})}
	p.done = make(chan error, 1)
	go func() {
		err := p.srv.Serve(ln)
		if !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("proxy server stopped", "error", err)
		}
		p.done <- err
	}()
	p.log.Info("proxy listening", "addr", ln.Addr().String(), "upstream", redacted(p.upstream))
	return nil
}

// Done receives the HTTP server's end: an error when it stopped serving by
// itself (its listener failed), http.ErrServerClosed after Stop; nil
// before Start. A caller that waits for a signal waits for it too: a proxy
// that no longer serves should not look like one running.
func (p *Proxy) Done() <-chan error { return p.done }

// Addr is the address Start listens on.
func (p *Proxy) Addr() string {
	if p.ln == nil {
		return ""
	}
	return p.ln.Addr().String()
}

// Stop stops accepting requests, waits (bounded by ctx) for the requests in
// flight and then for the turns being published. Past ctx's deadline it
// cuts the requests still in flight: their connections are closed, which
// cancels their upstream requests, and none of their turns is published
// (a request ending as the cut comes is not either: the caller closes the
// NATS connection next). It then waits up to haltWait for the turns whose
// publish began before, and returns an error naming what it cut.
func (p *Proxy) Stop(ctx context.Context) error {
	var cut error
	if p.srv != nil {
		if err := p.srv.Shutdown(ctx); err != nil {
			n := p.inFlight.Load()
			p.halt()
			_ = p.srv.Close()
			cut = fmt.Errorf("proxy: stop: %d %w: %w", n, ErrRequestsCut, err)
		}
	}
	p.halt() // the handlers have returned, or were cut: none publishes from here on
	done := make(chan struct{})
	go func() { p.publishes.Wait(); close(done) }()
	wait := ctx
	if cut != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(context.Background(), haltWait)
		defer cancel()
	}
	select {
	case <-done:
		return cut
	case <-wait.Done():
		// Turns lost are a failure whatever was cut (not ErrRequestsCut:
		// memoryd proxy exits 1 for them, as without a cut).
		if cut != nil {
			return fmt.Errorf("proxy: stop: turns still being published %s after the requests in flight were cut (%v)", haltWait, cut)
		}
		return fmt.Errorf("proxy: stop: turns still being published: %w", ctx.Err())
	}
}

// haltWait bounds how long Stop waits, past its deadline, for the turns
// whose publish had begun.
const haltWait = 2 * time.Second

// halt stops turns from being published.
func (p *Proxy) halt() {
	p.mu.Lock()
	p.halted = true
	p.mu.Unlock()
}

// upstreamURL is the upstream's URL of the endpoint at path.
func (p *Proxy) upstreamURL(path string) string {
	if p.query == "" {
		return p.upstream + path
	}
	return p.upstream + path + "?" + p.query
}

// redacted is u with its password, if any, shown as "xxxxx": secrets are
// never logged.
func redacted(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return pu.Redacted()
}
