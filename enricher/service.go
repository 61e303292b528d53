package enricher

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/memoryd/memoryd/store"
)

// SchemaBase is where the JSON Schemas of the endpoints' requests and replies
// are published (docs/schemas in the repository); an endpoint's metadata
// names its two files.
const SchemaBase = "https://github.com/memoryd/memoryd/blob/main/docs/schemas/"

// ServiceName is the micro service name, as listed by `nats micro ls`.
const ServiceName = "memoryd"

// Service is the memoryd micro service. Create it with New, then Start it;
// Stop it before closing its connection or store.
type Service struct {
	cfg    Config
	logger *slog.Logger
	tracer trace.Tracer // nil when Config.TracerProvider is: no tracing
	// traceKey keys the user hash of spans (userHash): random per
	// process, so that a span's hash cannot be reversed by hashing
	// guessed user ids.
	traceKey []byte
	stats    map[string]*endpointStats
	// One lane per endpoint kind, so that no kind waits behind another.
	enrichLane, searchLane, toolLane *lane

	// Each group of endpoints holds only the part of Config.Store it uses.
	recall Recaller
	// hybrid is the vector side of enrich and search; nil without
	// Config.Embedder.
	hybrid *hybrid
	// docs is what enrich reads document chunks with.
	docs ChunkSearcher
	// working is Config.Observer when it is a WorkObserver, else nil.
	working WorkObserver
	failed  ErrorObserver // nil unless Config.Observer is one
	reads   memoryReads
	// small is which users' keyword-only reads skip the pruned statement.
	small  *smallUsers
	writes memoryWrites
	admin  adminOps
	// exportBuilds holds the one slot for reading a whole export into
	// memory (see exports.build).
	exportBuilds chan struct{}

	mu       sync.Mutex
	svc      micro.Service
	stopping bool
	work     sync.WaitGroup // request goroutines and the warmer; Stop waits for them
	// active counts the requests running: work's request goroutines and
	// those the drain hands over during a stop, which run on the delivery
	// goroutine (not in work). Raised under mu; Stop tells whether it
	// cancelled any. idle is signalled when it falls to 0.
	active atomic.Int64
	// unanswered counts the requests in active that have not begun their
	// reply (answerMark): those a stop past its deadline reports cancelled.
	unanswered atomic.Int64
	idle       chan struct{}
	quit       chan struct{} // closed by Stop
	// drainWait, set by tests, is called each time Stop waits for
	// requests still running once work's goroutines are done.
	drainWait func()
	// halted ends every request's work: Stop cancels it when its deadline
	// passes with requests still in progress.
	halted  context.Context
	halt    context.CancelFunc
	warming atomic.Bool // a warmer goroutine runs

	// unsafeReplies counts the requests guardReply dropped; unsafeWarned
	// is the count at its last warning, logged at unsafeLogged (unix ns).
	unsafeReplies, unsafeWarned, unsafeLogged atomic.Int64
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
		idle:   make(chan struct{}, 1),

		enrichLane: newLane(cfg.MaxInFlight, cfg.MaxUserEnrichInFlight),
		searchLane: newLane(cfg.MaxSearchInFlight, cfg.MaxUserInFlight),
		toolLane:   newLane(cfg.MaxToolInFlight, cfg.MaxUserInFlight),

		recall: cfg.Store,
		writes: memoryWrites{store: cfg.Store},

		exportBuilds: make(chan struct{}, 1),
	}
	s.docs = cfg.Store
	s.halted, s.halt = context.WithCancel(context.Background())
	s.working, _ = cfg.Observer.(WorkObserver)
	s.failed, _ = cfg.Observer.(ErrorObserver)
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer("github.com/memoryd/memoryd/enricher")
		s.traceKey = make([]byte, 32)
		_, _ = rand.Read(s.traceKey) // never fails (crypto/rand)
	}
	s.hybrid = newHybrid(cfg, s.logger)
	s.small = newSmallUsers()
	s.reads = memoryReads{store: cfg.Store, dailyCap: cfg.DailyTokensPerUser, hybrid: s.hybrid, small: s.small, logger: s.logger}
	s.admin = adminOps{forget: cfg.Forget, logger: s.logger}
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
	lane        *lane // bounds its requests worked on and waiting
	// handle validates a request and returns its work; nil for enrich,
	// whose handler answers degraded rather than with errors.
	handle func(token string, data []byte) (call, error)
	// timeout bounds the work from the request's arrival; 0 is
	// Config.WriteTimeout (enrich has Config.Timeout). A request waits
	// for a slot at most WriteTimeout in any case.
	timeout time.Duration
}

// budget is how long ep's work may take from the request's arrival.
func (s *Service) budget(ep endpoint) time.Duration {
	if ep.timeout > 0 {
		return ep.timeout
	}
	return s.cfg.WriteTimeout
}

// call is a validated request's work, run on a request goroutine. An enrich
// call never fails; the others return a *ServiceError or a store error.
type call func(ctx context.Context) (any, error)

func (s *Service) endpoints() []endpoint {
	eps := []endpoint{
		{name: "enrich", subject: "enrich", description: "memory relevant to a message, with the text to inject", lane: s.enrichLane},
		{name: "search", subject: "search", description: "full-text search over the user's remembered context", lane: s.searchLane, handle: s.reads.search},
		{name: "store", subject: "store", description: "remember a question/answer pair (store_memory tool)", lane: s.toolLane, handle: s.writes.storeContext},
		{name: "clear", subject: "clear", description: "forget context items by id, by question, or all of them", lane: s.toolLane, handle: s.writes.clearContext},
		{name: "facts_set", subject: "facts.set", description: "set a fact (set_fact tool)", lane: s.toolLane, handle: s.writes.setFact},
		{name: "facts_get", subject: "facts.get", description: "read one fact", lane: s.toolLane, handle: s.reads.getFact},
		{name: "facts_clear", subject: "facts.clear", description: "delete a fact", lane: s.toolLane, handle: s.writes.clearFact},
		{name: "facts_list", subject: "facts.list", description: "list the user's facts", lane: s.toolLane, handle: s.reads.listFacts},
		{name: "stats", subject: "stats", description: "the user's memory and ingestion counters", lane: s.toolLane, handle: s.reads.userStats},
		{name: "forget", subject: "forget", description: "delete everything kept about the user, including their events in the stream", lane: s.toolLane, handle: s.admin.forgetUser,
			timeout: s.cfg.ForgetTimeout},
		// Issue 16 item 7: context items by id (contextitems.go).
		{name: "context_list", subject: "context.list", description: "list the user's context items, newest first, paged", lane: s.toolLane, handle: s.contextItems().list},
		{name: "context_get", subject: "context.get", description: "read one context item by id", lane: s.toolLane, handle: s.contextItems().get},
		{name: "context_update", subject: "context.update", description: "replace a context item's question and/or answer", lane: s.toolLane, handle: s.contextItems().update},
		{name: "context_delete", subject: "context.delete", description: "delete one context item by id", lane: s.toolLane, handle: s.contextItems().delete},
		// Provenance (issue 16, item 6).
		{name: "facts_history", subject: "facts.history", description: "one fact's changes with their sources, newest first", lane: s.toolLane, handle: s.reads.factHistory},
		// Export and import (issue 16 item 7, export.go).
		{name: "export", subject: "export", description: "the user's memory as JSON lines, a page at a time", lane: s.toolLane, handle: s.exports().export,
			timeout: s.cfg.ExportTimeout},
		{name: "import", subject: "import", description: "merge JSON lines of an export into the user's memory, atomically per request", lane: s.toolLane, handle: s.exports().importLines},
		// Languages (issue 17 item 6, language.go).
		{name: "language", subject: "language", description: "read or set the user's language, which chooses how their context is indexed and searched", lane: s.toolLane, handle: s.writes.language,
			timeout: languageTimeout},
	}
	return append(eps, s.docsEndpoints()...)
}

// Start registers the micro service and its endpoints. Call it once. It
// first warms the store's connection pool (bounded by WriteTimeout), so that
// the first enrich's budget measures its query, not connection setup; if
// Postgres does not answer, the service starts anyway (enrich answers
// degraded) and keeps warming in the background. It returns once the NATS
// server has the endpoints' subscriptions (a flush, bounded by
// WriteTimeout), so that a request sent after it, on any connection, is
// answered; while NATS is disconnected it does not wait: the client sends
// the subscriptions again when it reconnects.
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
			data := map[string]any{
				"server_errors": st.serverErrors.Load(),
				"degraded":      st.degraded.Load(),
				"work_count":    st.workCount.Load(),
				"avg_work_ms":   avg,
			}
			if e.Name == "enrich" && s.hybrid != nil {
				// Shared by enrich and search.
				maps.Copy(data, s.hybrid.stats())
			}
			return data
		},
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			s.logger.Error("nats service error", "subject", err.Subject, "error", err.Description)
		},
	})
	if err != nil {
		return fmt.Errorf("enricher: add service: %w", err)
	}
	for _, ep := range s.endpoints() {
		var h micro.Handler
		if ep.handle == nil {
			h = s.enrichHandler(ep)
		} else {
			h = s.handler(ep)
		}
		h = s.guardReply(h)
		err := svc.AddEndpoint(ep.name, h,
			micro.WithEndpointSubject(s.cfg.Prefix+"."+ep.subject+".*"),
			micro.WithEndpointMetadata(map[string]string{
				"description":    ep.description,
				"request_schema": SchemaBase + schemaName(ep.name) + ".request.json",
				"reply_schema":   SchemaBase + schemaName(ep.name) + ".reply.json",
			}))
		if err != nil {
			_ = svc.Stop()
			return fmt.Errorf("enricher: add endpoint %s: %w", ep.name, err)
		}
	}
	// The subscriptions went into the connection's write buffer, which
	// its flusher sends when it runs: a request sent on another
	// connection once Start returned could reach the server first and be
	// told no one answers (a CLI test at load 15-20, 3 of 150).
	if s.cfg.Conn.IsConnected() {
		flushCtx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
		err := s.cfg.Conn.FlushWithContext(flushCtx)
		cancel()
		if err != nil {
			s.logger.Warn("the NATS server has not confirmed the service's subscriptions; requests may go unanswered until it does", "error", err)
		}
	}
	s.svc = svc
	s.startSweeper()
	if !warmed {
		go s.warm() // it takes s.mu, held here
	}
	s.logger.Info("enrich service started", "prefix", s.cfg.Prefix, "version", s.cfg.Version, "id", svc.Info().ID,
		"max_in_flight", s.cfg.MaxInFlight, "max_user_in_flight", s.cfg.MaxUserEnrichInFlight)
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
// requests in progress to be answered, those the drain hands over while it
// waits included, or for ctx to end. The drain hands its requests over one
// at a time, and micro does not say when it is done: one still queued when
// the last running request ends is answered as below, without starting. Then it cancels the requests still in
// progress, so that none outlives the shutdown deadline holding a database
// connection: their transactions roll back, and each requester is answered
// that memoryd stopped before its request was done (a forget past its
// memory's transaction, that it did not finish: see worker.Forget). It
// waits up to haltWait for those answers and returns ctx's error. A request
// the drain hands over after that is answered the same at once, without
// being started.
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
	if !s.settle(ctx, done) {
		// The deadline may have passed before this stop began (another
		// component's stop overran it): only requests still unanswered
		// make it a failure, not one that has replied and is finishing.
		// Counted before the halt, which ends them.
		running := s.unanswered.Load()
		s.halt()
		hctx, cancel := context.WithTimeout(context.Background(), haltWait)
		s.settle(hctx, done)
		cancel()
		if running > 0 {
			return fmt.Errorf("enricher: stop: %d requests still in progress were cancelled: %w", running, ctx.Err())
		}
	}
	if err != nil {
		return fmt.Errorf("enricher: stop: %w", err)
	}
	s.logger.Info("enrich service stopped")
	return nil
}

// settle waits for work's goroutines (done), then for the requests the
// drain hands over, and halts once none runs. It reports false if ctx ends
// first. The count is read, and the halt made, under mu, where dispatch
// counts a request handed over: each one is either waited for or starts
// halted.
func (s *Service) settle(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
	case <-ctx.Done():
		return false
	}
	for {
		s.mu.Lock()
		if s.active.Load() == 0 {
			s.halt()
			s.mu.Unlock()
			return true
		}
		s.mu.Unlock()
		if s.drainWait != nil {
			s.drainWait()
		}
		select {
		case <-s.idle:
		case <-ctx.Done():
			return false
		}
	}
}

// endRequest uncounts a request, and signals settle when none is left.
func (s *Service) endRequest() {
	if s.active.Add(-1) == 0 {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

// Halted is done when Stop ends the requests in progress: at its deadline
// if requests were still running then (they are counted first, so Stop's
// error reports them), or as Stop returns. Work a request carries on past
// its own deadline (a forget's deletions after its transaction) ends with
// it, and so is reported as one of the requests Stop cancelled.
func (s *Service) Halted() context.Context { return s.halted }

// untilQuit returns a context of parent that is also cancelled when Stop
// begins (s.quit closes); its goroutine ends with the context, so the
// caller's cancel must run.
func (s *Service) untilQuit(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// haltWait bounds how long Stop waits, past its deadline, for the requests
// it cancelled to answer. A cancelled query returns at once; this is
// for a store that does not answer at all, and for a write whose COMMIT
// was under way, which goes on apart from the request for up to
// store.CommitBound: waited for less, the connection drained before its
// answer, and the client saw a timeout for a write that may have been
// done (a clear sent again then deletes what was written since).
const haltWait = store.CommitBound + 2*time.Second

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
		ctx, cancel := s.untilQuit(context.Background())
		defer cancel()
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

// guardReply drops a request whose reply subject is not a requester's inbox:
// a JetStream or system API subject ($JS.API.STREAM.DELETE..., $SYS...) or
// one of memoryd's own subjects (memory.turns.*, memory.changes.*,
// memory.deadletter.*). memoryd's credential may publish on those, so
// replying there would let any frontend delete or purge the turn stream,
// or forge another user's turns, dead letters and memory changes, with
// memoryd's permissions (a confused deputy).
//
// The warning is logged for the first such request and then at most once a
// minute, with how many were dropped since: a frontend sending them in a
// loop must not flood the log.
func (s *Service) guardReply(h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if r := req.Reply(); !SafeReplySubject(r, s.cfg.Prefix) {
			dropped := s.unsafeReplies.Add(1)
			now := time.Now().UnixNano()
			if last := s.unsafeLogged.Load(); (last == 0 || now-last >= int64(time.Minute)) && s.unsafeLogged.CompareAndSwap(last, now) {
				s.logger.Warn("request dropped: its reply subject is not an inbox", "subject", req.Subject(), "reply", r,
					"dropped_since_last_warning", dropped-s.unsafeWarned.Swap(dropped))
			}
			return
		}
		h.Handle(req)
	})
}

// SafeReplySubject reports whether memoryd may publish a reply on reply:
// an inbox, "_INBOX." or "_INBOX_<frontend>." and below (protocol.md,
// "Reply subjects"), or "_R_.", the reply subject nats-server gives a
// request that came through a service import from another account; and
// not one of memoryd's own subjects (prefix, or below it). Any other subject is refused: memoryd's credential may publish
// on the JetStream API, dead letters and memory changes, and
// allow_responses lets it answer on any subject a request names, so a
// reply there would act with its rights (purge the turn stream) or reach
// another service as a request of its own (another memoryd's forget). An
// empty reply (a publish that asks for none) is safe: nothing is sent.
func SafeReplySubject(reply, prefix string) bool {
	if reply == "" {
		return true
	}
	if !strings.HasPrefix(reply, "_INBOX.") && !strings.HasPrefix(reply, "_INBOX_") && !strings.HasPrefix(reply, "_R_.") {
		return false
	}
	return reply != prefix && !strings.HasPrefix(reply, prefix+".")
}
