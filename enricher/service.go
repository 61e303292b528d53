package enricher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// SchemaBase is where the JSON Schemas of the endpoints' requests and replies
// are published (docs/schemas in the repository); an endpoint's metadata
// names its two files.
const SchemaBase = "https://github.com/memoryd/memoryd/blob/main/docs/schemas/"

// ServiceName is the micro service name, as listed by `nats micro ls`.
const ServiceName = "memoryd"

// DefaultVersion is the service version used when none is configured.
const DefaultVersion = "0.1.0"

// DefaultMaxFacts is Config.MaxFacts' default.
const DefaultMaxFacts = 50

// maxListFacts bounds a facts.list reply well inside NATS's default 1 MiB
// max payload.
const maxListFacts = 1000

// Store is what the service reads and writes; *store.Store satisfies it.
type Store interface {
	Recall(ctx context.Context, q store.RecallQuery) ([]store.Fact, store.Candidates, error)
	SearchContext(ctx context.Context, q store.SearchQuery) (store.Candidates, error)
	DeleteContext(ctx context.Context, d store.ContextDelete) (int64, error)
	// InTx runs the direct writes (store, facts.set) in a transaction that
	// holds the user's forget lock (see forgetSafe).
	InTx(ctx context.Context, fn func(pgx.Tx, *store.Store) error) error
	Fact(ctx context.Context, userID, key string) (store.Fact, error)
	DeleteFact(ctx context.Context, userID, key string) (int64, error)
	Facts(ctx context.Context, userID string, limit int) ([]store.Fact, error)
	Stats(ctx context.Context, userID string) (store.UserStats, error)
}

// Observer is told about enrich replies (e.g. to feed a latency histogram).
// It is called on request goroutines and must be safe for concurrent use.
type Observer interface {
	Enriched(took time.Duration, degraded bool)
}

// Config configures a Service.
type Config struct {
	// Conn is the NATS connection the service answers on. Required.
	Conn *nats.Conn
	// Store holds the memory. Required.
	Store Store
	// Prefix is the first subject token(s). Default "memory".
	Prefix string
	// Version is the service's SemVer, shown by $SRV.INFO. Default
	// DefaultVersion.
	Version string
	// Timeout bounds an enrich request from its arrival to its reply; past
	// it the reply is degraded. Default 250ms.
	Timeout time.Duration
	// WriteTimeout bounds every other request; past it the reply is an
	// error 500. Default 5s.
	WriteTimeout time.Duration
	// MaxFacts caps the facts an enrich reply carries, most recently set
	// first. Default 50.
	MaxFacts int
	// MaxInFlight caps the enrich requests the service works on at once.
	// Up to four times as many wait for a turn; one that cannot start
	// within Timeout of its arrival, or finds the wait full, is answered
	// degraded. Enrich never waits behind the other endpoints, which have
	// limits of their own. Default 64.
	MaxInFlight int
	// MaxSearchInFlight caps the search requests worked on at once, and
	// MaxToolInFlight those of every other endpoint (store, clear, facts,
	// stats, forget), so that neither kind can take the slots or the store
	// connections enrich needs. Up to four times as many wait, each until
	// WriteTimeout after its arrival; past that, or when the wait is full,
	// the reply is a 500 "overloaded". Default 8 each.
	MaxSearchInFlight int
	MaxToolInFlight   int
	// MaxUserInFlight caps one user's search requests, and separately
	// their tool requests, worked on or waiting at once; more are answered
	// 500 "overloaded" at once, so that one user (or a tenant flooding in
	// one user's name) cannot take every slot. Default 4.
	MaxUserInFlight int
	// Logger receives service events; message bodies are logged at debug
	// level only. Default slog.Default().
	Logger *slog.Logger
	// Observer receives every enrich reply's latency, for metrics. Optional.
	Observer Observer
	// Forget deletes everything kept about a user (memory.forget): memory,
	// turns, jobs and the user's events in the stream. Its result is the
	// reply. Optional: without it the endpoint answers 501.
	Forget func(ctx context.Context, userID string) (events.ForgetReply, error)
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Timeout == 0 {
		c.Timeout = 250 * time.Millisecond
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 5 * time.Second
	}
	if c.MaxFacts == 0 {
		c.MaxFacts = DefaultMaxFacts
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 64
	}
	if c.MaxSearchInFlight == 0 {
		c.MaxSearchInFlight = 8
	}
	if c.MaxToolInFlight == 0 {
		c.MaxToolInFlight = 8
	}
	if c.MaxUserInFlight == 0 {
		c.MaxUserInFlight = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

var (
	prefixRegexp = regexp.MustCompile(`^[^.\s*>]+(\.[^.\s*>]+)*$`)
	semVerRegexp = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$`)
)

func (c Config) validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("enricher: Config.Conn is required")
	case c.Store == nil:
		return errors.New("enricher: Config.Store is required")
	case !prefixRegexp.MatchString(c.Prefix):
		return fmt.Errorf("enricher: Config.Prefix %q is not a subject prefix (dot-separated tokens without spaces or wildcards)", c.Prefix)
	case !semVerRegexp.MatchString(c.Version):
		return fmt.Errorf("enricher: Config.Version %q is not a SemVer version like 1.2.3", c.Version)
	case c.Timeout < 0:
		return fmt.Errorf("enricher: Config.Timeout %s is negative", c.Timeout)
	case c.WriteTimeout < 0:
		return fmt.Errorf("enricher: Config.WriteTimeout %s is negative", c.WriteTimeout)
	case c.MaxFacts < 1:
		return fmt.Errorf("enricher: Config.MaxFacts %d is under 1", c.MaxFacts)
	case c.MaxInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxInFlight %d is under 1", c.MaxInFlight)
	case c.MaxSearchInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxSearchInFlight %d is under 1", c.MaxSearchInFlight)
	case c.MaxToolInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxToolInFlight %d is under 1", c.MaxToolInFlight)
	case c.MaxUserInFlight < 1:
		return fmt.Errorf("enricher: Config.MaxUserInFlight %d is under 1", c.MaxUserInFlight)
	}
	return nil
}

// Service is the memoryd micro service. Create it with New, then Start it;
// Stop it before closing its connection or store.
type Service struct {
	cfg    Config
	logger *slog.Logger
	stats  map[string]*endpointStats
	// One lane per endpoint kind, so that no kind waits behind another.
	enrichLane, searchLane, toolLane *lane

	mu       sync.Mutex
	svc      micro.Service
	stopping bool
	work     sync.WaitGroup // request goroutines and the warmer; Stop waits for them
	quit     chan struct{}  // closed by Stop
	warming  atomic.Bool    // a warmer goroutine runs
}

// warmer is a Store that can re-open its pool's connections ahead of use
// (*store.Store does).
type warmer interface {
	Warm(ctx context.Context) error
}

// endpointStats are the counters micro cannot keep (see the package doc).
type endpointStats struct {
	serverErrors atomic.Int64
	degraded     atomic.Int64
	workNanos    atomic.Int64
	workCount    atomic.Int64
}

// New checks cfg and returns a service that is not started yet.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg:    cfg,
		logger: cfg.Logger.With("component", "enricher"),
		stats:  map[string]*endpointStats{},
		quit:   make(chan struct{}),

		enrichLane: newLane(cfg.MaxInFlight, 0),
		searchLane: newLane(cfg.MaxSearchInFlight, cfg.MaxUserInFlight),
		toolLane:   newLane(cfg.MaxToolInFlight, cfg.MaxUserInFlight),
	}
	for _, ep := range s.endpoints() {
		s.stats[ep.name] = &endpointStats{}
	}
	return s, nil
}

// endpoint is one request-reply endpoint.
type endpoint struct {
	name        string // micro endpoint name
	subject     string // after the prefix, before the user token
	description string
	handle      func(token string, data []byte) (call, error)
}

// call is a validated request's work, run on a request goroutine. An enrich
// call never fails; the others return a *ServiceError or a store error.
type call func(ctx context.Context) (any, error)

func (s *Service) endpoints() []endpoint {
	return []endpoint{
		{"enrich", "enrich", "memory relevant to a message, with the text to inject", nil},
		{"search", "search", "full-text search over the user's remembered context", s.search},
		{"store", "store", "remember a question/answer pair (store_memory tool)", s.storeContext},
		{"clear", "clear", "forget context items (clear_memory tool)", s.clearContext},
		{"facts_set", "facts.set", "set a fact (set_fact tool)", s.setFact},
		{"facts_get", "facts.get", "read one fact", s.getFact},
		{"facts_clear", "facts.clear", "delete a fact", s.clearFact},
		{"facts_list", "facts.list", "list the user's facts", s.listFacts},
		{"stats", "stats", "the user's memory and ingestion counters", s.userStats},
		{"forget", "forget", "delete everything kept about the user, including their events in the stream", s.forget},
	}
}

// Start registers the micro service and its endpoints. Call it once. It
// first warms the store's connection pool (bounded by WriteTimeout), so that
// the first enrich's budget measures its query, not connection setup; if
// Postgres does not answer, the service starts anyway (enrich answers
// degraded) and keeps warming in the background.
func (s *Service) Start(ctx context.Context) error {
	warmed := true
	if w, ok := s.cfg.Store.(warmer); ok {
		warmCtx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		if err := w.Warm(warmCtx); err != nil {
			warmed = false
			s.logger.Warn("memory store connections not ready; will keep trying", "error", err)
		}
		cancel()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc != nil || s.stopping {
		return errors.New("enricher: service already started")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("enricher: start: %w", err)
	}
	svc, err := micro.AddService(s.cfg.Conn, micro.Config{
		Name:        ServiceName,
		Version:     s.cfg.Version,
		Description: "memoryd long-term memory for chat frontends: enrich, search and memory tools",
		Metadata:    map[string]string{"prefix": s.cfg.Prefix},
		StatsHandler: func(e *micro.Endpoint) any {
			st := s.stats[e.Name]
			if st == nil {
				return nil
			}
			var avg float64
			if n := st.workCount.Load(); n > 0 {
				avg = float64(st.workNanos.Load()) / float64(n) / 1e6
			}
			return map[string]any{
				"server_errors": st.serverErrors.Load(),
				"degraded":      st.degraded.Load(),
				"work_count":    st.workCount.Load(),
				"avg_work_ms":   avg,
			}
		},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.logger.Error("nats service error", "subject", err.Subject, "error", err.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("enricher: add service: %w", err)
	}
	for _, ep := range s.endpoints() {
		h := s.handler(ep)
		if ep.name == "enrich" {
			h = s.enrichHandler()
		}
		err := svc.AddEndpoint(ep.name, h,
			micro.WithEndpointSubject(s.cfg.Prefix+"."+ep.subject+".*"),
			micro.WithEndpointMetadata(map[string]string{
				"description":    ep.description,
				"request_schema": SchemaBase + ep.name + ".request.json",
				"reply_schema":   SchemaBase + ep.name + ".reply.json",
			}))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("enricher: add endpoint %s: %w", ep.name, err)
		}
	}
	s.svc = svc
	if !warmed {
		go s.warm() // it takes s.mu, held here
	}
	s.logger.Info("enrich service started", "prefix", s.cfg.Prefix, "version", s.cfg.Version, "id", svc.Info().ID)
	return nil
}

// ID returns the micro service instance id ("" before Start), the last token
// of its $SRV.PING/INFO/STATS subjects.
func (s *Service) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.svc == nil {
		return ""
	}
	return s.svc.Info().ID
}

// Stop unsubscribes (draining requests already delivered) and waits for
// requests in progress to be answered, or for ctx to end.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	svc := s.svc
	already := s.stopping
	s.stopping = true
	s.mu.Unlock()
	if svc == nil || already {
		return nil
	}
	close(s.quit)
	err := svc.Stop()
	done := make(chan struct{})
	go func() { // exits when the last request goroutine does
		s.work.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("enricher: stop: requests still in progress: %w", ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("enricher: stop: %w", err)
	}
	s.logger.Info("enrich service stopped")
	return nil
}

// warm makes the store's pool open its connections in the background, so
// that enrich's budget measures queries, not connection setup: at start, and
// after an enrich found the store unavailable or slow (an outage), as soon as
// Postgres answers again. Tries are bounded; the next degraded reply starts
// another round. Only one warmer runs at a time.
func (s *Service) warm() {
	w, ok := s.cfg.Store.(warmer)
	if !ok || !s.warming.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		s.warming.Store(false)
		return
	}
	s.work.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.work.Done()
		defer s.warming.Store(false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		backoff := 50 * time.Millisecond
		for try := 1; try <= maxWarmTries; try++ {
			tryCtx, tryCancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
			err := w.Warm(tryCtx)
			tryCancel()
			if err == nil {
				s.logger.Debug("memory store connections warm", "tries", try)
				return
			}
			s.logger.Debug("cannot warm memory store connections yet", "try", try, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
	}()
}

// maxWarmTries bounds one round of warming: about a minute at one try a
// second once the backoff has grown.
const maxWarmTries = 60

// subjectToken returns the last token of subject: the user token.
func subjectToken(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

// handler adapts an endpoint to micro: validation on the delivery goroutine,
// the work on a request goroutine. The handler never blocks, so requests do
// not queue in the subscription behind one that waits for a slot.
func (s *Service) handler(ep endpoint) micro.Handler {
	st := s.stats[ep.name]
	l := s.toolLane
	if ep.name == "search" {
		l = s.searchLane
	}
	return micro.HandlerFunc(func(req micro.Request) {
		received := time.Now()
		token := subjectToken(req.Subject())
		work, err := ep.handle(token, req.Data())
		if err != nil {
			s.replyError(req, ep.name, err)
			return
		}
		reply := req.Reply()
		s.dispatch(l, token, received.Add(s.cfg.WriteTimeout), func() {
			ctx, cancel := context.WithDeadline(context.Background(), received.Add(s.cfg.WriteTimeout))
			defer cancel()
			res, err := work(ctx)
			st.workCount.Add(1)
			st.workNanos.Add(int64(time.Since(received)))
			if err != nil {
				st.serverErrors.Add(1)
				code, desc := s.classify(ep.name, err)
				s.publishError(reply, code, desc)
				return
			}
			s.publish(reply, res)
		}, func() {
			st.serverErrors.Add(1)
			s.publishError(reply, 500, "memoryd is overloaded; retry later")
		})
	})
}

// lane bounds one kind of request: at most cap(slots) are worked on at once,
// at most maxWaiting wait for a slot, and with perUser > 0 at most perUser of
// one user are worked on or waiting.
type lane struct {
	slots      chan struct{}
	maxWaiting int64
	waiting    atomic.Int64
	perUser    int

	mu    sync.Mutex
	users map[string]int // requests in the lane by user token
}

func newLane(limit, perUser int) *lane {
	return &lane{slots: make(chan struct{}, limit), maxWaiting: 4 * int64(limit), perUser: perUser, users: map[string]int{}}
}

// enter counts a request of user; false when the user is at the bound.
func (l *lane) enter(user string) bool {
	if l.perUser == 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[user] >= l.perUser {
		return false
	}
	l.users[user]++
	return true
}

func (l *lane) leave(user string) {
	if l.perUser == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users[user]--; l.users[user] <= 0 {
		delete(l.users, user)
	}
}

// queue counts a request that waits for a slot; false when the wait is full.
func (l *lane) queue() bool {
	if l.waiting.Add(1) > l.maxWaiting {
		l.waiting.Add(-1)
		return false
	}
	return true
}

// acquire waits for a slot until deadline, for a request queue counted.
func (l *lane) acquire(deadline time.Time) bool {
	defer l.waiting.Add(-1)
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// dispatch runs fn on a request goroutine once a slot of lane l is free,
// and calls overloaded instead when user is at the lane's per-user bound,
// the lane's wait is full, or no slot frees up before deadline. It never
// blocks the delivery goroutine, so a request is answered (in its budget)
// however many wait behind a busy lane. While the service stops, the work
// runs inline, so requests drained from the subscription are still answered.
func (s *Service) dispatch(l *lane, user string, deadline time.Time, fn, overloaded func()) {
	if !l.enter(user) {
		overloaded()
		return
	}
	slot := false
	select {
	case l.slots <- struct{}{}:
		slot = true
	default:
		if !l.queue() {
			l.leave(user)
			overloaded()
			return
		}
	}
	work := func() {
		defer l.leave(user)
		if !slot && !l.acquire(deadline) {
			overloaded()
			return
		}
		defer func() { <-l.slots }()
		fn()
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		work()
		return
	}
	s.work.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.work.Done()
		work()
	}()
}

// classify maps a call's error to a reply code and a description safe to
// show a caller; store errors are logged, not shown.
func (s *Service) classify(endpoint string, err error) (int, string) {
	var se *events.ServiceError
	switch {
	case errors.As(err, &se):
		return se.Code, se.Description
	case errors.Is(err, context.DeadlineExceeded):
		s.logger.Error("memory store timed out", "endpoint", endpoint, "error", err)
		return 500, fmt.Sprintf("memory store did not answer within %s", s.cfg.WriteTimeout)
	default:
		s.logger.Error("memory store failed", "endpoint", endpoint, "error", err)
		return 500, "memory store unavailable"
	}
}

// replyError answers a request refused on the delivery goroutine. The
// requester gets the full description (it names only what they sent); micro
// records what req.Error is given as the endpoint's last_error, which
// $SRV.STATS shows to anyone allowed to ask, so that gets only the code's
// generic text, never a user id, token or key.
func (s *Service) replyError(req micro.Request, endpoint string, err error) {
	code, desc := s.classify(endpoint, err)
	s.logger.Debug("bad request", "endpoint", endpoint, "code", code, "error", desc)
	detail := micro.WithHeaders(micro.Headers{micro.ErrorHeader: {desc}})
	if err := req.Error(fmt.Sprint(code), genericError(code), nil, detail); err != nil {
		s.logger.Warn("reply failed", "endpoint", endpoint, "error", err)
	}
}

// genericError is the text of an error code without any request's data.
func genericError(code int) string {
	switch code {
	case 400:
		return "bad request"
	case 404:
		return "not found"
	case 501:
		return "not enabled"
	default:
		return "server error"
	}
}

// publish and publishError answer from a request goroutine. They publish on
// the connection rather than through micro.Request, whose bookkeeping is not
// safe once the delivery goroutine has moved on.
func (s *Service) publish(reply string, v any) {
	buf := replyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledReply {
			replyBuffers.Put(buf)
		}
	}()
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		s.publishError(reply, 500, "encode reply: "+err.Error())
		return
	}
	if reply == "" {
		return
	}
	// Encode ends with a newline json.Marshal would not write; Publish
	// copies the data, so the buffer can go back to the pool.
	if err := s.cfg.Conn.Publish(reply, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); err != nil {
		s.logger.Warn("reply failed", "error", err)
	}
}

// replyBuffers holds reply encoding buffers, so that a reply does not
// allocate and grow a new one; buffers over maxPooledReply are dropped
// rather than kept for every later reply.
var replyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledReply = 64 << 10

func (s *Service) publishError(reply string, code int, desc string) {
	if reply == "" {
		return
	}
	msg := &nats.Msg{Subject: reply, Header: nats.Header{}}
	msg.Header.Set(micro.ErrorHeader, desc)
	msg.Header.Set(micro.ErrorCodeHeader, fmt.Sprint(code))
	if err := s.cfg.Conn.PublishMsg(msg); err != nil {
		s.logger.Warn("reply failed", "error", err)
	}
}

// enrichHandler answers enrich requests. Whatever Postgres does, exactly one
// reply goes out no later than Timeout after arrival: the store's answer if
// it comes in time, a degraded reply otherwise. A timer guards the bound
// even if a store call were to ignore its context.
func (s *Service) enrichHandler() micro.Handler {
	st := s.stats["enrich"]
	return micro.HandlerFunc(func(req micro.Request) {
		received := time.Now()
		deadline := received.Add(s.cfg.Timeout)
		p, err := s.parseEnrich(subjectToken(req.Subject()), req.Data())
		if err != nil {
			s.replyError(req, "enrich", err)
			return
		}
		if p.optOut {
			s.publish(req.Reply(), p.reply(received))
			return
		}
		reply := req.Reply()
		var replied atomic.Bool
		answer := func(r events.EnrichReply) {
			if !replied.CompareAndSwap(false, true) {
				return
			}
			took := time.Since(received)
			r.TookMS = millis(took)
			if s.cfg.Observer != nil {
				s.cfg.Observer.Enriched(took, r.Degraded)
			}
			if r.Degraded {
				st.degraded.Add(1)
				s.logger.Warn("enrich degraded", "user_id", p.userID, "reason", r.Reason, "took_ms", r.TookMS)
			} else {
				s.logger.Debug("enrich", "user_id", p.userID, "facts", len(r.Facts), "context", len(r.Context), "tokens", r.Tokens, "took_ms", r.TookMS)
			}
			s.publish(reply, r)
		}
		timedOut := func() string { return fmt.Sprintf("memory store did not answer within %s", s.cfg.Timeout) }
		s.dispatch(s.enrichLane, "", deadline, func() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			// The guard answers at the deadline even if the store call does
			// not return; it shares the context's timer.
			guard := context.AfterFunc(ctx, func() {
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					answer(p.degraded(timedOut()))
				}
			})
			defer guard()
			r, err := s.enrich(ctx, p)
			st.workCount.Add(1)
			st.workNanos.Add(int64(time.Since(received)))
			switch {
			case err == nil:
				answer(r)
			case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
				s.logger.Debug("enrich store timeout", "user_id", p.userID, "error", err)
				answer(p.degraded(timedOut()))
				s.warm()
			default:
				s.logger.Error("enrich store failed", "user_id", p.userID, "error", err)
				answer(p.degraded("memory store unavailable"))
				s.warm()
			}
		}, func() {
			answer(p.degraded("memoryd is overloaded"))
		})
	})
}

// enrichParams is a validated enrich request.
type enrichParams struct {
	userID     string
	keywords   []string
	maxResults int
	threshold  float64
	maxTokens  int
	at         time.Time
	format     string
	optOut     bool
}

func (p enrichParams) reply(received time.Time) events.EnrichReply {
	return events.EnrichReply{
		UserID:   p.userID,
		Facts:    []events.Fact{},
		Context:  []events.ContextItem{},
		Keywords: p.keywords,
		TookMS:   millis(time.Since(received)),
	}
}

func (p enrichParams) degraded(reason string) events.EnrichReply {
	r := p.reply(time.Now())
	r.Degraded, r.Reason = true, reason
	return r
}

func (s *Service) parseEnrich(token string, data []byte) (enrichParams, error) {
	var req events.EnrichRequest
	if err := decode(data, &req); err != nil {
		return enrichParams{}, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return enrichParams{}, err
	}
	p := enrichParams{
		userID:     req.UserID,
		maxResults: events.DefaultMaxResults,
		threshold:  events.DefaultThreshold,
		maxTokens:  events.DefaultMaxTokens,
		at:         req.At,
		format:     req.Format,
		optOut:     req.Memory != nil && !*req.Memory,
		keywords:   []string{},
	}
	if strings.TrimSpace(req.Message) == "" {
		return p, badRequest("message is required")
	}
	if len(req.Message) > events.MaxMessageBytes {
		return p, badRequest("message is %d bytes, over the %d byte limit", len(req.Message), events.MaxMessageBytes)
	}
	if req.MaxResults != nil {
		if p.maxResults = *req.MaxResults; p.maxResults < 1 || p.maxResults > events.MaxMaxResults {
			return p, badRequest("max_results %d is not in 1..%d", p.maxResults, events.MaxMaxResults)
		}
	}
	if req.Threshold != nil {
		// NaN cannot arrive in JSON; the range check still guards Go callers.
		if p.threshold = *req.Threshold; !(p.threshold >= 0 && p.threshold <= 1) {
			return p, badRequest("threshold %v is not in 0..1", p.threshold)
		}
	}
	if req.MaxTokens != nil {
		if p.maxTokens = *req.MaxTokens; p.maxTokens < 1 || p.maxTokens > events.MaxMaxTokens {
			return p, badRequest("max_tokens %d is not in 1..%d", p.maxTokens, events.MaxMaxTokens)
		}
	}
	if !req.At.IsZero() {
		if y := req.At.Year(); y < 1970 || y > 9999 {
			return p, badRequest("at: year %d is out of range", y)
		}
	}
	switch req.Format {
	case "":
		p.format = events.FormatInline
	case events.FormatInline, events.FormatSystem, events.FormatMarkdown:
	default:
		return p, badRequest("format %q is not inline, system or markdown", req.Format)
	}
	if !p.optOut {
		p.keywords = Keywords(req.Message)
	}
	return p, nil
}

func (s *Service) enrich(ctx context.Context, p enrichParams) (events.EnrichReply, error) {
	facts, cands, err := s.cfg.Store.Recall(ctx, store.RecallQuery{
		SearchQuery: store.SearchQuery{UserID: p.userID, Keywords: p.keywords},
		MaxFacts:    s.cfg.MaxFacts,
	})
	if err != nil {
		return events.EnrichReply{}, err
	}
	items := Rank(cands, p.at, p.threshold, p.maxResults)
	r := p.reply(time.Now())
	r.Facts, r.Context, r.Injection, r.Tokens = inject(p.format, p.maxTokens, wireFacts(facts), wireItems(items))
	return r, nil
}

func (s *Service) search(token string, data []byte) (call, error) {
	var req events.SearchRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Query) == "" {
		return nil, badRequest("query is required")
	}
	if len(req.Query) > events.MaxMessageBytes {
		return nil, badRequest("query is %d bytes, over the %d byte limit", len(req.Query), events.MaxMessageBytes)
	}
	limit := events.DefaultSearchResults
	if req.MaxResults != nil {
		if limit = *req.MaxResults; limit < 1 || limit > events.MaxMaxResults {
			return nil, badRequest("max_results %d is not in 1..%d", limit, events.MaxMaxResults)
		}
	}
	return func(ctx context.Context) (any, error) {
		cands, err := s.cfg.Store.SearchContext(ctx, store.SearchQuery{UserID: req.UserID, Keywords: Keywords(req.Query)})
		if err != nil {
			return nil, err
		}
		return events.SearchReply{Results: wireItems(Rank(cands, time.Time{}, 0, limit))}, nil
	}, nil
}

func (s *Service) storeContext(token string, data []byte) (call, error) {
	var req events.StoreRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Question) == "" {
		return nil, badRequest("question is required")
	}
	if err := checkText("question", req.Question, events.MaxQuestionBytes); err != nil {
		return nil, err
	}
	if err := checkText("answer", req.Answer, events.MaxAnswerBytes); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var (
			id     int64
			stored bool
		)
		err := s.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			id, stored, err = q.StoreContext(ctx, store.ContextWrite{
				UserID:     req.UserID,
				Question:   req.Question,
				Answer:     req.Answer,
				Provenance: store.Provenance{Extractor: "direct"},
			})
			return err
		})
		if err != nil {
			return nil, err
		}
		return events.StoreReply{ID: id, Stored: stored}, nil
	}, nil
}

func (s *Service) clearContext(token string, data []byte) (call, error) {
	var req events.ClearRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkUser(token, req.UserID); err != nil {
		return nil, err
	}
	switch {
	case req.ID < 0:
		return nil, badRequest("id %d is not a context item id", req.ID)
	case req.ID == 0 && strings.TrimSpace(req.Question) == "" && !req.All:
		return nil, badRequest(`set "id", "question", or "all": true to say what to forget`)
	case req.All && (req.ID != 0 || req.Question != ""):
		return nil, badRequest(`"all" cannot be combined with "id" or "question"`)
	}
	return func(ctx context.Context) (any, error) {
		n, err := s.cfg.Store.DeleteContext(ctx, store.ContextDelete{UserID: req.UserID, ID: req.ID, Question: req.Question, All: req.All})
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

func (s *Service) setFact(token string, data []byte) (call, error) {
	var req events.SetFactRequest
	if err := decodeWrite(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Value) == "" {
		return nil, badRequest("value is required (use facts.clear to delete a fact)")
	}
	if err := checkText("value", req.Value, events.MaxFactValueBytes); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		var (
			f      store.Fact
			stored bool
		)
		err := s.forgetSafe(ctx, req.UserID, func(q *store.Store) (err error) {
			f, stored, err = q.SetFact(ctx, req.UserID, key, req.Value)
			return err
		})
		if err != nil {
			return nil, err
		}
		reply := events.SetFactReply{OK: stored, Fact: events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt.UTC()}}
		if !stored {
			reply.Reason = fmt.Sprintf("a turn stamped %s, later than this request, set %q; that value stays current",
				f.SourceAt.UTC().Format(time.RFC3339), key)
		}
		return reply, nil
	}, nil
}

func (s *Service) getFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		f, err := s.cfg.Store.Fact(ctx, req.UserID, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &events.ServiceError{Code: 404, Description: fmt.Sprintf("no fact %q", key)}
		}
		if err != nil {
			return nil, err
		}
		return events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt}, nil
	}, nil
}

func (s *Service) clearFact(token string, data []byte) (call, error) {
	var req events.FactRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	key, err := checkKey(token, req.UserID, req.Key)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		n, err := s.cfg.Store.DeleteFact(ctx, req.UserID, key)
		if err != nil {
			return nil, err
		}
		return events.DeletedReply{Deleted: n}, nil
	}, nil
}

func (s *Service) listFacts(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		facts, err := s.cfg.Store.Facts(ctx, req.UserID, maxListFacts)
		if err != nil {
			return nil, err
		}
		return events.FactsReply{Facts: wireFacts(facts)}, nil
	}, nil
}

func (s *Service) userStats(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		st, err := s.cfg.Store.Stats(ctx, req.UserID)
		if err != nil {
			return nil, err
		}
		return events.StatsReply{
			TurnsReceived:   st.TurnsReceived,
			TurnsProcessed:  st.TurnsProcessed,
			TurnsFailed:     st.TurnsFailed,
			TurnsPending:    st.TurnsPending,
			JobsPending:     st.TurnsPending,
			Facts:           st.Facts,
			ContextItems:    st.ContextItems,
			LastProcessedAt: st.LastProcessedAt,
			LLMUsage:        wireUsage(st.LLMUsage), // never nil: {} for a user without usage
		}, nil
	}, nil
}

func (s *Service) forget(token string, data []byte) (call, error) {
	req, err := decodeUser(token, data)
	if err != nil {
		return nil, err
	}
	if s.cfg.Forget == nil {
		return nil, &events.ServiceError{Code: 501, Description: "forget is not enabled on this memoryd"}
	}
	return func(ctx context.Context) (any, error) {
		s.logger.Info("forgetting user", "user_id", req.UserID)
		return s.cfg.Forget(ctx, req.UserID)
	}, nil
}

// decodeUser decodes a request that names only the user, checking it
// against the subject's token.
func decodeUser(token string, data []byte) (events.UserRequest, error) {
	var req events.UserRequest
	if err := decode(data, &req); err != nil {
		return req, err
	}
	return req, checkUser(token, req.UserID)
}

func wireFacts(facts []store.Fact) []events.Fact {
	out := make([]events.Fact, len(facts))
	for i, f := range facts {
		out[i] = events.Fact{Key: f.Key, Value: f.Value, UpdatedAt: f.UpdatedAt.UTC()}
	}
	return out
}

func wireItems(items []store.ContextItem) []events.ContextItem {
	out := make([]events.ContextItem, len(items))
	for i, it := range items {
		out[i] = events.ContextItem{
			ID:             it.ID,
			Question:       it.Question,
			Answer:         it.Answer,
			Score:          math.Round(it.Score*1e6) / 1e6,
			CreatedAt:      it.CreatedAt.UTC(),
			EventID:        it.EventID,
			ConversationID: it.ConversationID,
		}
	}
	return out
}

// wireUsage maps the store's token counts to the wire's; the map is never
// nil, so that llm_usage is {} rather than null.
func wireUsage(usage map[string]store.TokenUsage) map[string]events.TokenUsage {
	out := make(map[string]events.TokenUsage, len(usage))
	for model, u := range usage {
		out[model] = events.TokenUsage{
			PromptTokens:     u.PromptTokens,
			CompletionTokens: u.CompletionTokens,
			Extractions:      u.Extractions,
		}
	}
	return out
}

func millis(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// forgetSafe runs a direct write (store, facts.set) holding the user's
// forget lock shared: a forget running at the same time either waits for it
// and deletes what it wrote, or committed first, and the write then starts
// the new memory a write after a forget is documented to start. Without the
// lock, a write committing between the forget's deletes and its commit
// survived a forget that answered ok.
func (s *Service) forgetSafe(ctx context.Context, userID string, write func(q *store.Store) error) error {
	return s.cfg.Store.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if _, err := q.LockUsers(ctx, []string{events.UserToken(userID)}); err != nil {
			return err
		}
		return write(q)
	})
}
