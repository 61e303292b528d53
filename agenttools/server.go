// Package agenttools serves a user's memory to agents as MCP tools and
// resources (the Model Context Protocol, with the official Go SDK). It
// talks to a running memoryd over NATS like any frontend (events.Client),
// so it holds no database connection of its own.
//
// Who the user is never comes from a tool's arguments: over stdio it is
// fixed by the configuration (Config.User, one agent process per user);
// over streamable HTTP it is the user the request's bearer token maps to
// (Config.Keys), and a request without a known token is answered 401.
package agenttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/authchallenge"
	"github.com/memoryd/memoryd/internal/bodytime"
	"github.com/memoryd/memoryd/internal/httperrlog"
)

// DefaultTimeout bounds one call to memoryd when Config.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// DefaultMaxUserCalls is Config.MaxUserCalls' default: memoryd's own
// per-user bound on requests at once (enricher.Config.MaxUserInFlight).
const DefaultMaxUserCalls = 4

// DefaultMaxResultBytes bounds the memories' text in one search_memory or
// list_memories result when Config.MaxResultBytes is 0: about 16,000
// tokens, a share of an agent's context a tool result may take.
const DefaultMaxResultBytes = 64 << 10

// DefaultSessionTimeout closes an HTTP session idle this long when
// Config.SessionTimeout is 0.
const DefaultSessionTimeout = 30 * time.Minute

// clientIdle closes a client's keep-alive connection idle this long between
// requests (net/http keeps one forever without it, and /healthz needs no
// key: idle connections could pile up to the file descriptor limit). A
// session's GET stream is a request in progress, not idle.
const clientIdle = 2 * time.Minute

// DefaultBodyTimeout is Config.BodyTimeout's default.
const DefaultBodyTimeout = time.Minute

// keyRecheck is how often a session's GET stream checks that the key it
// was opened with (the stream's) is still in force (the key file is reloaded as often:
// apikeys.DefaultPollInterval).
const keyRecheck = 2 * time.Second

// DefaultMaxUserSessions is Config.MaxUserSessions' default.
const DefaultMaxUserSessions = 32

// Realm is the realm of the WWW-Authenticate challenge of a 401 over HTTP:
// Bearer realm="memoryd MCP", with error="invalid_token" when the request
// sent a bearer token the keys do not know.
const Realm = "memoryd MCP"

// DefaultVersion is the version the server reports when Config.Version is
// empty.
const DefaultVersion = "0.1.0"

// KeyLookup maps an API key to the user it belongs to (apikeys.Keys
// satisfies it).
type KeyLookup interface {
	Lookup(key string) (userID string, ok bool)
}

// Config configures a Server.
type Config struct {
	// Client reaches the memoryd service. Required.
	Client *events.Client
	// User is the user every stdio session acts for. Required by ServeStdio.
	User string
	// Listen is the address Start serves streamable HTTP on, e.g.
	// 127.0.0.1:8765. Required by Start.
	Listen string
	// Keys maps an HTTP request's bearer token to its user. Required by
	// Start and Handler.
	Keys KeyLookup
	// Timeout bounds one call to memoryd, including its wait for a slot
	// of MaxUserCalls. Default DefaultTimeout.
	Timeout time.Duration
	// MaxUserCalls is how many calls of one user this server sends to
	// memoryd at once; more wait (within Timeout), so that an agent's
	// parallel tool calls queue here instead of meeting memoryd's own
	// per-user bound (enricher.Config.MaxUserInFlight, with four times as
	// many waiting), which answers the excess "overloaded" at once.
	// Default DefaultMaxUserCalls, that bound.
	MaxUserCalls int
	// SessionTimeout closes an HTTP session that has had no POST for this
	// long (its client then gets 404 and opens a new one; a client that
	// only holds a GET stream open counts as idle): without it
	// every session a client opened and did not DELETE (a crashed agent, a
	// script) kept its goroutine and memory until the process ended.
	// Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxUserSessions bounds the HTTP sessions one user's keys hold open
	// at once: a new one past it closes the user's idle session (no
	// request in flight, no GET stream open, not opened in the last 10 s
	// without a request since) used least recently, and is refused (429)
	// when there is none, until one ends (DELETE, or
	// SessionTimeout); the 429 has a Retry-After, in whole seconds rounded
	// up, when one of them is only spared for its 10 s: the time left of
	// the first grace to end (none when all are busy). Without it a key
	// could open sessions without end, each holding its goroutines and
	// memory for SessionTimeout. Default DefaultMaxUserSessions.
	MaxUserSessions int
	// BodyTimeout bounds reading an HTTP request's body; a client that
	// sends it slower is cut off. Without it a client holding a key could
	// hold requests open without end by sending their bodies a byte at a
	// time. Default DefaultBodyTimeout.
	BodyTimeout time.Duration
	// MaxResultBytes bounds the text (questions and answers) of the
	// memories one search_memory or list_memories result holds: the
	// lower-ranked (or older) ones past it are left out, the first always
	// kept, and the result says so (truncated; a list's next_cursor then
	// goes on after the last kept). Without it an agent asking for 200
	// memories of real chats got 776 KB in one result. Default
	// DefaultMaxResultBytes.
	MaxResultBytes int
	// Version is reported to clients. Default DefaultVersion.
	Version string
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults fills the zero fields with their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxUserCalls == 0 {
		c.MaxUserCalls = DefaultMaxUserCalls
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.MaxUserSessions == 0 {
		c.MaxUserSessions = DefaultMaxUserSessions
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate names the first field no server could use.
func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("agenttools: Config.Client is required")
	case c.Timeout < 0:
		return fmt.Errorf("agenttools: Config.Timeout %s is out of range", c.Timeout)
	case c.MaxResultBytes < 0:
		return fmt.Errorf("agenttools: Config.MaxResultBytes %d is under 0", c.MaxResultBytes)
	case c.SessionTimeout < 0:
		return fmt.Errorf("agenttools: Config.SessionTimeout %s is out of range", c.SessionTimeout)
	case c.MaxUserCalls < 0:
		return fmt.Errorf("agenttools: Config.MaxUserCalls %d is under 0", c.MaxUserCalls)
	case c.MaxUserSessions < 0:
		return fmt.Errorf("agenttools: Config.MaxUserSessions %d is under 0", c.MaxUserSessions)
	case c.BodyTimeout < 0:
		return fmt.Errorf("agenttools: Config.BodyTimeout %s is out of range", c.BodyTimeout)
	case c.User != "" && (len(c.User) > events.MaxUserIDBytes || !utf8.ValidString(c.User) || strings.ContainsRune(c.User, utf8.RuneError)):
		return fmt.Errorf("agenttools: Config.User must be valid UTF-8 of at most %d bytes without U+FFFD", events.MaxUserIDBytes)
	}
	return nil
}

// Server serves the memory tools over stdio or streamable HTTP.
type Server struct {
	cfg  Config
	gate *userGate // the calls of each user at once
	http *http.Server
	addr string     // the address Start listens on
	done chan error // Start's Serve result
	// sessions is the MCP server behind Start's handler: Stop closes its
	// sessions, whose idle timers and state outlived the HTTP server.
	sessions *mcp.Server
	// flight tracks Start's requests in flight by session, for Stop.
	flight *inFlight
	// now is the sessions cap's clock (time.Now; a test's own).
	now func() time.Time
	// cutCalls cancels the contexts of Start's tool calls (Stop).
	cutCalls context.CancelCauseFunc
	// writeStall is how long ServeIO's output may take none of a write
	// (DefaultWriteStall; a test's own).
	writeStall time.Duration
}

// errStopping is the cause of the context of a tool call cut because the
// server is stopping: stdio's ServeIO context done, or Stop past its
// deadline.
var errStopping = errors.New("the MCP server is stopping")

// stopGrace bounds how long a stopped stdio session, or Stop past its
// deadline, waits for the answers to the calls it cut (each returns as its
// context ends) to be written: past it, with a call that does not return
// or a client that does not read its answers, they are dropped.
const stopGrace = 5 * time.Second

// New checks cfg and returns a server; nothing connects until ServeStdio
// or Start.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, gate: newUserGate(cfg.MaxUserCalls)}, nil
}

// ServeStdio runs one MCP session on stdin and stdout for Config.User, until
// the client closes stdin or ctx is done.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeIO(ctx, os.Stdin, os.Stdout)
}

// ServeIO runs one MCP session on in and out (newline-delimited JSON-RPC,
// MCP's stdio transport) for Config.User, until in ends or ctx is done.
// When in ends, the requests read before it are answered first (within
// Config.Timeout and 10 s more), so a client may write its requests and
// close its end at once. When ctx is done, the calls in flight (and any
// read after) are cut: their contexts are cancelled and each is answered
// with a tool error saying the server is stopping (within stopGrace, 5 s;
// past it the answers still due are dropped), and ServeIO returns nil. in
// is closed then if it is an io.Closer.
func (s *Server) ServeIO(ctx context.Context, in io.Reader, out io.Writer) error {
	if s.cfg.User == "" {
		return errors.New("agenttools: Config.User is required over stdio")
	}
	user := s.cfg.User
	cut, cutCalls := context.WithCancelCause(context.Background())
	defer cutCalls(errStopping)
	srv := s.newMCPServer(func(*mcp.RequestExtra) (string, error) { return user, nil }, cut)
	s.cfg.Logger.Info("mcp serving on stdio", "user_token", events.UserToken(user))
	stall := s.writeStall
	if stall == 0 {
		stall = DefaultWriteStall
	}
	rw := newAnswered(in, out, s.cfg.Timeout+10*time.Second, stall)
	// The session is not given ctx: the SDK's stop closes the session at
	// once, which waits for the calls in flight without cancelling them
	// (a SIGTERM waited out a call's whole --timeout) and then drops their
	// answers. It ends once the calls ctx cuts are answered.
	run, endRun := context.WithCancel(context.Background())
	defer endRun()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-run.Done():
			return // the input ended
		case <-ctx.Done():
		}
		s.cfg.Logger.Info("mcp stopping: cutting the calls in flight", "requests_unanswered", rw.unanswered())
		cutCalls(errStopping)
		grace, cancel := context.WithTimeout(run, stopGrace)
		defer cancel()
		rw.settle(grace)
		// Answers still due past the grace are dropped, those being
		// written too: a client that stopped reading held the session,
		// and the process, for good.
		rw.drop()
		endRun()
	}()
	err := srv.Run(run, &mcp.IOTransport{Reader: rw, Writer: rw})
	endRun()
	<-stopped
	if ctx.Err() == nil {
		if rw.stalled() {
			// What ended the session, rather than what the SDK saw
			// as it closed it (the input closed under its read).
			return errStalled
		}
		return err
	}
	if n := rw.unanswered(); n > 0 {
		s.cfg.Logger.Warn("mcp stopped with requests unanswered", "requests", n)
	}
	return nil // stopped by the caller
}

// Handler returns the streamable HTTP handler: every request needs an
// Authorization: Bearer <key> header with a key Config.Keys knows (401
// otherwise, with a WWW-Authenticate challenge of Realm), and its session
// acts for that key's user only (the SDK refuses a session id presented
// with another user's key).
func (s *Server) Handler() (http.Handler, error) {
	h, _, err := s.handler(context.Background())
	return h, err
}

// handler is Handler, with the MCP server whose sessions it serves; the
// tool calls' contexts end when cut does.
func (s *Server) handler(cut context.Context) (http.Handler, *mcp.Server, error) {
	if s.cfg.Keys == nil {
		return nil, nil, errors.New("agenttools: Config.Keys is required over HTTP")
	}
	srv := s.newMCPServer(func(extra *mcp.RequestExtra) (string, error) {
		if extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
			// Unreachable behind RequireBearerToken; refuse rather than guess.
			return "", errors.New("request is not authenticated")
		}
		return extra.TokenInfo.UserID, nil
	}, cut)
	keys := s.cfg.Keys
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		user, ok := keys.Lookup(token)
		if !ok {
			return nil, errUnknownKey{}
		}
		// The key rides along for the session's later checks that it is
		// still in force (sessionCap).
		return &auth.TokenInfo{UserID: user, Extra: map[string]any{keyExtra: token}}, nil
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Logger: s.cfg.Logger, SessionTimeout: s.cfg.SessionTimeout})
	// API keys do not expire; revoking one is removing it from the keys,
	// which also ends the sessions last used with it (sessionCap).
	mux := http.NewServeMux()
	capped := &sessionCap{h: h, srv: srv, keys: keys, max: s.cfg.MaxUserSessions, owners: map[string]owner{}, opening: map[string]int{}, now: s.now}
	if capped.now == nil {
		capped.now = time.Now
	}
	// The SDK's 401 has no WWW-Authenticate without OAuth metadata, which
	// API keys have none of, yet RFC 9110 requires one on every 401 and
	// the MCP spec's authorization section requires it of servers. It is
	// set before the SDK's check and taken off once the request passes it,
	// before anything is written: only the SDK's refusals carry it.
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Del("WWW-Authenticate")
		capped.ServeHTTP(w, r)
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", authchallenge.Bearer(Realm, r))
		if !authchallenge.HasBearer(r) {
			// Refused here rather than by the SDK, whose "no bearer token"
			// does not say where a key comes from.
			http.Error(w, "missing API key: "+keyHelp, http.StatusUnauthorized)
			return
		}
		authed.ServeHTTP(w, r)
	})
	// Probes, without a key: the process runs; it can reach memoryd.
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !s.cfg.Client.Connected() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"nats":"not connected"}` + "\n"))
			return
		}
		// Connected as the client knows it: a round trip tells a server
		// that stopped answering (hung, or a lost host) before the
		// connection's pings drop it (a dependency walk).
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := s.cfg.Client.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(map[string]string{"nats": "connected, but the server does not answer: " + err.Error()})
			return
		}
		_, _ = w.Write([]byte(`{"nats":"ok"}` + "\n"))
	})
	// Every request with a body, the probes' too: net/http reads a body
	// the handler left unread before it answers, so a probe announcing a
	// body it never sent was held open without a key (a review).
	return bodytime.Bound(s.cfg.BodyTimeout, mux), srv, nil
}

// Start listens on Config.Listen and serves streamable HTTP until Stop.
func (s *Server) Start(ctx context.Context) error {
	if s.cfg.Listen == "" {
		return errors.New("agenttools: Config.Listen is required over HTTP")
	}
	cut, cutCalls := context.WithCancelCause(context.Background())
	h, sessions, err := s.handler(cut)
	if err != nil {
		cutCalls(nil)
		return err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		cutCalls(nil)
		return fmt.Errorf("agenttools: listen on %s: %w", s.cfg.Listen, err)
	}
	s.cutCalls = cutCalls
	s.addr = ln.Addr().String()
	s.sessions = sessions
	s.flight = &inFlight{sessions: map[string]*sessionFlight{}}
	s.http = &http.Server{Handler: s.flight.wrap(h), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: clientIdle, ErrorLog: httperrlog.New(s.cfg.Logger)}
	// Once net/http refuses new requests, not before: a client seeing its
	// stream end as the stop began could still open a session (a review).
	s.http.RegisterOnShutdown(s.flight.stop)
	s.done = make(chan error, 1)
	go func() { s.done <- s.http.Serve(ln) }()
	s.cfg.Logger.Info("mcp serving streamable HTTP", "addr", s.addr)
	return nil
}

// Addr is the address Start listens on ("" before Start).
func (s *Server) Addr() string {
	return s.addr
}

// Done receives the HTTP server's end: an error when it stopped serving by
// itself, http.ErrServerClosed after Stop; nil before Start.
func (s *Server) Done() <-chan error { return s.done }

// Stop stops the HTTP server: it takes no new requests and waits for the
// tool calls in flight until ctx is done, then cuts those still running:
// their contexts are cancelled, each is answered with a tool error saying
// the server is stopping, and their connections are closed once answered
// (within stopGrace, 5 s more; past it, at once). A session's GET stream
// (its event stream) ends as soon as the session has no request in
// flight, at once for an idle one, and when the calls are cut.
// Then it closes every session: a session lives on its own, beyond its
// requests, until it is deleted or idle for Config.SessionTimeout, and a
// stopped server's would have lived that long (a process embedding the
// server and starting another kept them all). A call still running in a
// session whose request is gone (its client went away) is cut then too.
func (s *Server) Stop(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	defer endSessions(s.sessions, nil)
	// Before the sessions close, which waits for their calls: a call runs
	// in its session, and neither closing its connection nor the session
	// cancels it (a stop past --shutdown-timeout waited out the call's
	// --timeout).
	defer s.cutCalls(errStopping)
	if err := s.http.Shutdown(ctx); err != nil {
		n := s.flight.count()
		s.cutCalls(errStopping)
		s.flight.cut()
		// A cut call answers at once, with a tool error saying the server
		// is stopping: its connection is closed once that answer is
		// written, within stopGrace (past it, what is still open is
		// closed). Closed at once, the call got no answer at all.
		grace, cancel := context.WithTimeout(context.Background(), stopGrace)
		defer cancel()
		if s.http.Shutdown(grace) != nil {
			_ = s.http.Close()
		}
		return fmt.Errorf("agenttools: stop: %d %w: %w", n, ErrCallsCut, err)
	}
	return nil
}

// ErrCallsCut is in Stop's error when it cut tool calls in flight at its
// deadline (memoryd mcp logs it and exits 0, as serve does).
var ErrCallsCut = errors.New("tool calls still in flight were cut")

// inFlight counts each session's HTTP requests in flight (by their
// Mcp-Session-Id; those without one count as one more session) so that
// Stop ends a session's GET stream (its event stream) once the stop began
// and the session has no other request in flight. The stream is a request
// that never ends by itself (the SDK's client and most agents hold one
// open), so it must end for the stop to; but the Go SDK's client fails its
// session, and the calls in flight with it, once it cannot reconnect an
// ended stream (13 to 26 s, against the closed listener), so a session
// with a call in flight keeps its stream until its calls end or are cut.
type inFlight struct {
	mu       sync.Mutex
	stopping bool
	calls    int // requests in flight other than GET, for Stop's error
	sessions map[string]*sessionFlight
}

// sessionFlight is one session's requests in flight; end ends its GET
// streams. It is dropped once none is in flight.
type sessionFlight struct {
	calls, streams int
	end            context.Context
	endStreams     context.CancelFunc
}

// wrap gives h's GET requests a context that also ends with their
// session's streams, and counts the others.
func (f *inFlight) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get("Mcp-Session-Id")
		stream := r.Method == http.MethodGet
		end := f.begin(sid, stream)
		defer f.finish(sid, stream)
		if stream {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(end, cancel)()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// begin records a request of session sid and returns the context that
// ends the session's streams.
func (f *inFlight) begin(sid string, stream bool) context.Context {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.sessions[sid]
	if sf == nil {
		sf = &sessionFlight{}
		sf.end, sf.endStreams = context.WithCancel(context.Background())
		f.sessions[sid] = sf
	}
	if stream {
		sf.streams++
		if f.stopping && sf.calls == 0 {
			// Begun as the stop began (net/http refuses those after).
			sf.endStreams()
		}
	} else {
		sf.calls++
		f.calls++
	}
	return sf.end
}

// finish records the end of a request begin recorded.
func (f *inFlight) finish(sid string, stream bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sf := f.sessions[sid]
	if stream {
		sf.streams--
	} else {
		sf.calls--
		f.calls--
	}
	if sf.calls == 0 && (f.stopping || sf.streams == 0) {
		sf.endStreams()
	}
	if sf.calls == 0 && sf.streams == 0 {
		delete(f.sessions, sid)
	}
}

// stop ends the streams of the sessions with no other request in flight;
// those of the others end as their last request does.
func (f *inFlight) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopping = true
	for _, sf := range f.sessions {
		if sf.calls == 0 {
			sf.endStreams()
		}
	}
}

// cut ends every session's streams: the calls are cut.
func (f *inFlight) cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sf := range f.sessions {
		sf.endStreams()
	}
}

// count is the requests in flight other than GET.
func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// keyHelp ends the body of a 401: what a person reading it does.
const keyHelp = "send 'Authorization: Bearer <key>' with a key made by memoryd keys add --file F --user U"

// errUnknownKey is the verifier's error for a key the keys do not know:
// the SDK answers an auth.ErrInvalidToken with 401 and the error's text
// as the body, so the text is the whole sentence.
type errUnknownKey struct{}

func (errUnknownKey) Error() string        { return "unknown API key: " + keyHelp }
func (errUnknownKey) Is(target error) bool { return target == auth.ErrInvalidToken }

// keyExtra names the request's API key in its auth.TokenInfo's Extra.
const keyExtra = "memoryd_key"

// sessionCap refuses a user's new HTTP session (a POST without a session
// id: an initialize) while the user holds max sessions. It learns a
// session's user and key from the id the SDK's handler answers with; the
// sessions still live are the SDK server's.
//
// At the cap, a new session closes the user's session used least recently
// that is idle (used since its initialize, or opened newSessionGrace ago;
// no request in flight, no GET stream open) rather than be refused:
// clients that never DELETE (the TypeScript SDK's close, the MCP
// inspector) left their sessions until SessionTimeout, and a script run 32
// times in half an hour was refused (an MCP walk). A session's client that
// comes back gets 404 and opens a new one, as the protocol says; only when
// every session is busy or brand new is the new one refused.
//
// It also ends the sessions of a revoked key: a session's GET stream
// checks its key every keyRecheck and closes the session once the key is
// gone (the stream stayed open, and the session held one of its user's
// slots, until SessionTimeout), and a new session's count closes those
// the user holds with a revoked key.
type sessionCap struct {
	h    http.Handler
	srv  *mcp.Server
	keys KeyLookup
	max  int

	now func() time.Time

	mu      sync.Mutex
	owners  map[string]owner // session id → its user and key, for the sessions this process opened
	opening map[string]int   // user → its new sessions still being opened (counted as held)
}

// newSessionGrace is how long a session not used since its initialize is
// not closed to make room for another (sessionCap.reserve): a client sends
// its next request (notifications/initialized, or its first call) at once.
const newSessionGrace = 10 * time.Second

// owner is the user of a session and the key it was last used with; busy
// counts its requests in flight (a GET stream's whole life included), used
// is when its last request began or ended, and seen whether it has had a
// request since its initialize.
type owner struct {
	user, key string
	busy      int
	used      time.Time
	seen      bool
}

// inForce reports whether o's key still stands for o's user.
func (c *sessionCap) inForce(o owner) bool {
	u, ok := c.keys.Lookup(o.key)
	return ok && u == o.user
}

func (c *sessionCap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ti := auth.TokenInfoFromContext(r.Context())
	if ti == nil {
		c.h.ServeHTTP(w, r)
		return
	}
	o := owner{user: ti.UserID}
	o.key, _ = ti.Extra[keyExtra].(string)
	sid := r.Header.Get("Mcp-Session-Id")
	if sid != "" && o.key != "" && c.use(sid, o, 1) {
		defer c.use(sid, o, -1)
	}
	if r.Method == http.MethodGet && sid != "" {
		stop := c.watchKey(r.Context(), sid, o)
		defer stop()
	}
	if r.Method != http.MethodPost || sid != "" {
		c.h.ServeHTTP(w, r)
		return
	}
	// The slot is taken before the SDK opens the session: read first and
	// recorded after, initializes sent at once all passed the check.
	if n, wait, ok := c.reserve(o.user); !ok {
		if wait > 0 {
			// Whole seconds, rounded up: a retry then finds the session's
			// grace over.
			w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
		}
		http.Error(w, fmt.Sprintf("this key's user holds %d MCP sessions, the most at once, each with a request in flight, its event stream open or opened in the last %s: end one (DELETE) or let one expire", n, newSessionGrace), http.StatusTooManyRequests)
		return
	}
	rw := &recordSession{ResponseWriter: w, c: c, owner: o}
	defer rw.record()
	c.h.ServeHTTP(rw, r)
}

// use records a request of session sid by o beginning (d 1) or ending
// (-1), and reports whether sid is o's user's session. The key a session
// was last used with is the one that must stay in force: a client moved
// to a new key before the old one is revoked keeps its session (reserve).
func (c *sessionCap) use(sid string, o owner, d int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.owners[sid]
	if !ok || cur.user != o.user {
		return false
	}
	cur.key, cur.busy, cur.used, cur.seen = o.key, cur.busy+d, c.now(), true
	c.owners[sid] = cur
	return true
}

// watchKey checks, every keyRecheck until ctx ends or the returned stop
// is called, that the key of session sid's stream is in force, and closes
// the session (which ends the stream) once it is not. The goroutine is
// the stream request's: stop waits for it.
func (c *sessionCap) watchKey(ctx context.Context, sid string, o owner) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(keyRecheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !c.inForce(o) {
					c.closeSessions(map[string]bool{sid: true})
					return
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// closeSessions closes the live sessions of ids.
func (c *sessionCap) closeSessions(ids map[string]bool) {
	endSessions(c.srv, ids)
}

// endSessions closes srv's live sessions whose ids are in ids (all of them
// when ids is nil). Closing one waits for its requests in flight, each
// bounded by Config.Timeout; the sessions are collected first because a
// session leaves srv's list as it closes.
func endSessions(srv *mcp.Server, ids map[string]bool) {
	var end []*mcp.ServerSession
	for ss := range srv.Sessions() {
		if ids == nil || ids[ss.ID()] {
			end = append(end, ss)
		}
	}
	for _, ss := range end {
		_ = ss.Close()
	}
}

// recordSession records the session the SDK answers with as its owner's
// the moment the answer starts, before the client can read it: recorded
// after ServeHTTP returned, a client's next initialize (or its reconnect
// after a DELETE) could come first and find the slot still taken.
type recordSession struct {
	http.ResponseWriter
	c     *sessionCap
	owner owner
	done  bool
}

func (rw *recordSession) record() {
	if rw.done {
		return
	}
	rw.done = true
	c := rw.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opening[rw.owner.user]--; c.opening[rw.owner.user] <= 0 {
		delete(c.opening, rw.owner.user)
	}
	if id := rw.Header().Get("Mcp-Session-Id"); id != "" {
		o := rw.owner
		o.used = c.now()
		c.owners[id] = o
	}
}

func (rw *recordSession) WriteHeader(code int) {
	rw.record()
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recordSession) Write(b []byte) (int, error) {
	rw.record()
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (the SDK's flushes) reach w.
func (rw *recordSession) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// reserve counts user's sessions, live or being opened, forgetting those
// that ended and closing those opened with a key since revoked, and takes
// one more if under max, closing the user's idle session used least
// recently to stay under it. Refused, wait is how long until the first of
// the user's sessions not used since its initialize leaves its grace and
// may be closed to make room, sessions still being opened counted from
// now (0 when every one is busy: when one ends is not known).
func (c *sessionCap) reserve(user string) (n int, wait time.Duration, ok bool) {
	end := map[string]bool{}
	defer func() {
		// Closed outside mu: a close waits for the session's calls.
		if len(end) > 0 {
			c.closeSessions(end)
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	// Read under mu: an id recorded is then live in this read unless it
	// ended (read before mu, a session opened and recorded in between was
	// dropped from owners while live).
	live := map[string]bool{}
	for ss := range c.srv.Sessions() {
		live[ss.ID()] = true
	}
	n = c.opening[user]
	if n > 0 {
		// Recorded as they are answered, from then on in their grace.
		wait = newSessionGrace
	}
	idlest := ""
	now := c.now()
	for id, o := range c.owners {
		switch {
		case !live[id]:
			delete(c.owners, id)
		case o.user != user:
		case !c.inForce(o):
			end[id] = true
			delete(c.owners, id)
		default:
			n++
			// A session not used since its initialize is not taken in its
			// first newSessionGrace: its client is about to use it
			// (initializes sent at once closed each other's new sessions,
			// a review). Past that its client is gone (a probe or a script
			// that only initializes, a client that died): never taken, such
			// sessions held the user at 429 until SessionTimeout (a review).
			fresh := !o.seen && now.Sub(o.used) < newSessionGrace
			if left := o.used.Add(newSessionGrace).Sub(now); fresh && (wait == 0 || left < wait) {
				wait = left
			}
			if !fresh && o.busy == 0 && (idlest == "" || o.used.Before(c.owners[idlest].used)) {
				idlest = id
			}
		}
	}
	if n >= c.max && idlest != "" {
		end[idlest] = true
		delete(c.owners, idlest)
		n--
	}
	if n >= c.max {
		return n, wait, false
	}
	c.opening[user]++
	return n, 0, true
}
