// Package app is memoryd's composition root: it assembles the store, the
// worker (ingest and extraction), the enrich service, metrics and the
// operators' endpoint from one Config, and offers the admin operations
// (replay, forget, failed turns, prune) over the same connections. The
// commands map their flags to a Config and print results; the system's
// policy (job sizes, replay batching, the forget reply, readiness) lives
// here.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// App is memoryd assembled from a Config. Its connections open on first
// use: Start opens them and runs the service; the admin operations open
// only what they need. Stop closes whatever is open.
type App struct {
	cfg    Config
	logger *slog.Logger
	// autoJobSize: Worker.JobSize was 0, chosen from the extractor;
	// otherwise jobSize is the size asked for, before ingest's batch
	// bounded it (replay's batches are larger, see ReplayJobSize).
	autoJobSize bool
	jobSize     int
	// waitOutage and waitCheckTimeout are WaitExtracted's bounds:
	// defaultWaitOutage and defaultWaitCheckTimeout, shorter in a test.
	waitOutage, waitCheckTimeout time.Duration

	mu       sync.Mutex
	store    *store.Store
	migrated bool
	// schemaChecked: openStore looked for a newer memoryd's migrations
	// (and warned of them) once; the store refuses forget, import and
	// reset on each call (store.Config.SchemaVersion).
	schemaChecked bool
	nc            *nats.Conn
	ownsNC        bool
	ncClosed      chan struct{} // closed when an owned nc has closed
	ext           worker.Extractor
	emb           *embedding.Client // nil until used, and when embedding is off
	// embedSizes is what the embed jobs' client and the queries' learn of
	// the text lengths the server takes (embedding.InputSizes): a query is
	// cut to what the jobs' texts taught.
	embedSizes *embedding.InputSizes
	worker     *worker.Worker
	// enqueuer inserts the document jobs of a process that runs no worker
	// (Role enrich), while started.
	enqueuer *worker.Enqueuer
	// presence records a process that runs no worker, with embeddings on,
	// as a reader of its model's vectors (Role enrich), while started.
	presence *worker.Presence
	// follower gives the items a process that runs no worker, with
	// embeddings off, writes embed jobs of the running workers' model
	// (Role enrich), while started.
	follower *worker.EmbedFollower
	changes  *worker.Changes // publishes memory changes (changes.go)
	// publishing: the store was opened by Start, whose change publisher
	// is woken after the store's commits (changeCommitted) instead of by
	// their notifications.
	publishing bool
	// publisher is changes, for changeCommitted, which the store's
	// connections call without a.mu.
	publisher atomic.Pointer[worker.Changes]
	// consumerSeen is when the health check last found the durable
	// consumer (unix nanoseconds): see consumerCheck.
	consumerSeen atomic.Int64
	enrich       *enricher.Service
	// enrichDB is enrich's own pool (EnrichPool), open while enrich runs.
	enrichDB *store.Store
	// pressure feeds enrich's reply times to the worker's Pacer; nil when
	// BackPressure is off.
	pressure *pressure
	ops      *opsServer
	metrics  *metrics
	// tracer is the trace pipeline, started with the first component
	// (tracing.go); nil before.
	tracer *Tracer
}

// New fills cfg's defaults (Config.withDefaults, the one place they are
// filled) and validates it; it connects to nothing.
func New(cfg Config) (*App, error) {
	asked := cfg.Worker.JobSize
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, logger: cfg.Logger, autoJobSize: asked == 0, jobSize: asked,
		waitOutage: defaultWaitOutage, waitCheckTimeout: defaultWaitCheckTimeout, embedSizes: embedding.NewInputSizes()}
	if cfg.BackPressure.Latency > 0 {
		a.pressure = newPressure(cfg.BackPressure.Latency, cfg.BackPressure.GiveWay)
		if cfg.BackPressure.GiveWay > 0 {
			// Only the shared pool: enrich's own pool never gives way.
			a.cfg.Store.GiveWay = a.pressure.GiveWay
		}
	}
	return a, nil
}

// Config returns the configuration in use, defaults filled.
func (a *App) Config() Config { return a.cfg }

// Store returns the store, opening it (and applying the migrations) when
// it is not open yet.
func (a *App) Store(ctx context.Context) (*store.Store, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.openStore(ctx, true)
}

// Conn returns the NATS connection, connecting when not connected yet.
func (a *App) Conn() (*nats.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.connect()
}

// openStoreToWork opens the store for a process that works on it (serve,
// replay, embed): it applies the pending migrations, or, with
// Config.NoMigrate, leaves the schema alone and refuses a database with
// migrations pending (PendingMigrationsError).
func (a *App) openStoreToWork(ctx context.Context) (*store.Store, error) {
	s, err := a.openStore(ctx, !a.cfg.NoMigrate)
	if err != nil || !a.cfg.NoMigrate {
		return s, err
	}
	pending, err := s.PendingMigrations(ctx, migrations.FS)
	if err != nil {
		return nil, err
	}
	if !pending.Empty() {
		files, _ := fs.Glob(migrations.FS, "*.sql")
		return nil, &PendingMigrationsError{Pending: pending, Empty: len(pending.Memoryd) == len(files)}
	}
	return s, nil
}

// openStore opens the store once; migrate also applies the migrations
// (once). Commands that only read or delete (forget, failed) do not
// migrate, so that they never change a schema an older serve runs on.
func (a *App) openStore(ctx context.Context, migrate bool) (*store.Store, error) {
	if a.store == nil {
		cfg := a.cfg.Store
		known, err := store.NewestMigration(migrations.FS)
		if err != nil {
			return nil, err
		}
		cfg.SchemaVersion = known
		if a.publishing {
			// This process's change publisher is woken after its own
			// commits, so they need not notify (store.Config.QuietChanges).
			cfg.QuietChanges, cfg.Committed = true, a.changeCommitted
		}
		s, err := store.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		a.store = s
	}
	if migrate && !a.migrated {
		if _, err := a.store.Migrate(ctx, migrations.FS, a.logger); err != nil {
			return nil, err
		}
		a.migrated = true
	}
	if !a.schemaChecked {
		ahead, err := a.store.NewerMigrations(ctx, migrations.FS)
		if err != nil {
			return nil, err
		}
		a.schemaChecked = true
		if len(ahead) > 0 {
			a.logger.Warn("a newer memoryd migrated this database: run forget, import and replay --reset with it (this one refuses them)",
				"newer_migrations", ahead)
		}
	}
	return a.store, nil
}

func (a *App) connect() (*nats.Conn, error) {
	if a.nc != nil {
		return a.nc, nil
	}
	if a.cfg.Conn != nil {
		a.nc = a.cfg.Conn
		return a.nc, nil
	}
	nc, err := a.cfg.NATS.Connect(a.logger)
	if err != nil {
		return nil, err
	}
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	a.nc, a.ownsNC, a.ncClosed = nc, true, closed
	return nc, nil
}

func (a *App) jetStream() (jetstream.JetStream, error) {
	nc, err := a.connect()
	if err != nil {
		return nil, err
	}
	return jetstream.New(nc)
}

// extractor builds the configured extractor once: the LLM when a base URL
// is set, the offline rules otherwise. a.mu is held.
func (a *App) extractor() (worker.Extractor, error) {
	if a.ext != nil {
		return a.ext, nil
	}
	if a.cfg.LLM.BaseURL == "" {
		a.ext = extractor.NewRules()
		return a.ext, nil
	}
	lc := a.cfg.LLM
	tp, err := a.tracerLocked()
	if err != nil {
		return nil, err
	}
	lc.TracerProvider = tp
	llm, err := extractor.NewLLM(lc)
	if err != nil {
		return nil, err
	}
	a.ext = llm
	return a.ext, nil
}

// Start connects, applies the migrations and runs the service: the ingest
// consumer and extraction workers and the enrich service (or one of the two,
// as Config.Role says), the memory change publisher and, with Ops.Addr, the
// operators' endpoint. On error what was started is stopped again.
func (a *App) Start(ctx context.Context) (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.worker != nil || a.enrich != nil {
		return errors.New("app: already started")
	}
	// The endpoint's address is taken first: a port in use fails Start
	// before any worker has fetched a job it would then have to finish.
	var ln net.Listener
	if a.cfg.Ops.Addr != "" {
		if ln, err = net.Listen("tcp", a.cfg.Ops.Addr); err != nil {
			return &OpsListenError{Addr: a.cfg.Ops.Addr, Err: err}
		}
	}
	// On error what started is stopped, within startCleanupTimeout.
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startCleanupTimeout)
			defer cancel()
			_ = a.stopLocked(cctx)
			if a.ops != nil {
				_ = a.ops.stop(cctx)
				a.ops = nil
			} else if ln != nil {
				_ = ln.Close()
			}
		}
	}()
	runWorker, runEnrich := a.cfg.Role.runs()
	var ext worker.Extractor
	if runWorker {
		if ext, err = a.extractor(); err != nil {
			return err
		}
		a.logExtractor(ctx, ext)
		a.logJobSize(ctx)
	} else {
		a.logger.InfoContext(ctx, "role enrich: no ingest or extraction in this process (processes of role all or ingest work the turn stream and the jobs)")
	}
	// Before connecting, as the LLM client is built: a bad
	// --embed-api-key-file is said as such whether NATS is up or not.
	if _, err := a.embedder(); err != nil {
		return err
	}
	a.logEmbeddings(ctx)
	a.metrics = newMetrics()
	llm, _ := ext.(usageReporter) // nil with the offline extractor
	var llmModel string
	if llm != nil {
		llmModel = ext.Info().Model
	}
	a.metrics.reg.MustRegister(newServiceCollector(a, llm, llmModel), buildInfo(a.cfg.Version, a.cfg.Role))
	if a.pressure != nil {
		a.metrics.registerGiveWay(a.pressure)
	}
	if ln != nil {
		// Served from here on, before connecting and migrating, which can
		// take minutes: /healthz answers, /readyz says it is starting.
		a.ops = startOps(ln, a.cfg.Ops, a, a.metrics, a.logger)
	}
	if a.store == nil {
		a.publishing = true // Start runs the change publisher
	}
	nc, err := a.connect()
	if err != nil {
		return err
	}
	if runWorker {
		// Before the database is created or migrated: a stream another
		// prefix's memoryd consumes is refused with nothing set up.
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		if err := worker.CheckConsumerPrefix(ctx, js, a.cfg.Stream, a.cfg.Worker.Durable, a.cfg.Prefix); err != nil {
			return err
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := a.refuseNewDatabase(ctx, func() (jetstream.JetStream, error) { return js, nil }, false); err != nil {
		return err
	}
	s, err := a.openStoreToWork(ctx)
	if err != nil {
		return err
	}
	if err := a.checkDeployment(ctx, s, js, claimPrefixFresh); err != nil {
		return err
	}
	a.warnUnfinishedResets(ctx, s)
	a.warnAutovacuumOff(ctx, s)
	if runWorker {
		a.warnVacuumDenied(ctx, s)
		a.warnOtherExtractors(ctx, s, ext)
	}
	if runEnrich {
		a.warnEmbedlessSearch(ctx, s)
	}
	if runWorker {
		if err = a.startWorkerLocked(ctx, s, nc, ext, false); err != nil {
			return err
		}
	} else {
		// The documents its requests put are chunked by the workers of
		// other processes: the job is inserted in the put's transaction.
		if a.enqueuer, err = worker.NewEnqueuer(worker.EnqueuerConfig{Store: s, MaxAttempts: a.cfg.Worker.MaxAttempts, Logger: a.logger}); err != nil {
			return err
		}
		// It searches the vectors of its embedding model: recorded as a
		// process, so that the workers' prune over the size limit keeps
		// them during a change of model (store.DeleteOtherModelVectors).
		if a.cfg.Embed.BaseURL != "" {
			p, err := worker.NewPresence(worker.PresenceConfig{Store: s, EmbedModel: a.cfg.Embed.StoredModel(),
				HeartbeatInterval: a.cfg.Worker.HeartbeatInterval, Logger: a.logger})
			if err != nil {
				return err
			}
			if err := p.Start(ctx); err != nil {
				return err
			}
			a.presence = p
		} else {
			// Its memory.store and import items get embed jobs of the
			// model the workers embed with, if any.
			f, err := worker.NewEmbedFollower(worker.EmbedFollowerConfig{Store: s, Enqueuer: a.enqueuer,
				Live: a.cfg.Worker.ProcessTimeout, JobSize: a.cfg.Worker.EmbedJobSize, MaxAttempts: a.cfg.Worker.EmbedMaxAttempts, Logger: a.logger})
			if err != nil {
				return err
			}
			if err := f.Start(ctx); err != nil {
				return err
			}
			a.follower = f
		}
	}
	if err = a.startChangesLocked(ctx, s, nc); err != nil {
		return err
	}
	if runEnrich {
		if err = a.startEnrichLocked(ctx, s, nc); err != nil {
			return err
		}
	}
	if a.ops != nil {
		var ui *riverUI
		if a.cfg.RiverUI.Enabled {
			if ui, err = startRiverUI(ctx, a.cfg.RiverUI, s.Pool(), a.logger); err != nil {
				return err
			}
		}
		a.ops.started(ui)
	}
	return nil
}

// startCleanupTimeout bounds the stop of what a failed Start had started:
// past it running jobs are cancelled (and handed back) rather than waited
// for.
const startCleanupTimeout = 30 * time.Second

// startWorkerLocked starts the worker on s and nc; without ingest it runs
// extraction only (replay --work). a.mu is held.
func (a *App) startWorkerLocked(ctx context.Context, s *store.Store, nc *nats.Conn, ext worker.Extractor, withoutIngest bool) error {
	return a.startWorkerWithLocked(ctx, s, nc, ext, func(c *worker.Config) { c.DisableIngest = withoutIngest })
}

// startWorkerWithLocked is startWorkerLocked with mod applied to the
// worker's Config last.
func (a *App) startWorkerWithLocked(ctx context.Context, s *store.Store, nc *nats.Conn, ext worker.Extractor, mod func(*worker.Config)) error {
	wc := a.cfg.Worker
	wc.Conn, wc.Store, wc.Extractor = nc, s, ext
	wc.ChunkDocument = enricher.ChunkDocument
	emb, err := a.embedder()
	if err != nil {
		return err
	}
	if emb != nil {
		wc.Embedder = emb
	}
	if a.metrics != nil {
		wc.Observer = a.metrics
	}
	if a.pressure != nil {
		wc.Pacer = a.pressure
	}
	if wc.TracerProvider, err = a.tracerLocked(); err != nil {
		return err
	}
	mod(&wc)
	w, err := worker.New(wc)
	if err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	a.worker = w
	return nil
}

// StartEnrich runs the enrich service alone, without ingest, extraction
// or the operators' endpoint: for measuring it (membench) and for
// processes that only answer. Stop stops it.
func (a *App) StartEnrich(ctx context.Context) (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.enrich != nil {
		return errors.New("app: already started")
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startCleanupTimeout)
			defer cancel()
			_ = a.stopLocked(cctx)
		}
	}()
	s, err := a.openStore(ctx, true)
	if err != nil {
		return err
	}
	nc, err := a.connect()
	if err != nil {
		return err
	}
	return a.startEnrichLocked(ctx, s, nc)
}

// startEnrichLocked starts the enrich service; memory.forget goes through
// the running worker when there is one (so that it waits for the user's
// running jobs), else straight to the store and stream. a.mu is held.
func (a *App) startEnrichLocked(ctx context.Context, s *store.Store, nc *nats.Conn) error {
	if err := a.setEmbedHookLocked(ctx, s); err != nil {
		return err
	}
	// Enrich reads from a pool of its own, its statements prepared on
	// every connection before the service answers: ingest and extraction
	// cannot take its connections, and the first requests do not pay for
	// connection setup or statement preparation.
	if a.enrichDB == nil {
		es, err := store.Open(ctx, store.Config{URL: a.cfg.Store.URL, MaxConns: int32(a.cfg.EnrichPool.MaxConns),
			MinConns: int32(a.cfg.EnrichPool.MinConns), WarmStatements: true, CancelOnServer: true, Logger: a.logger})
		if err != nil {
			return fmt.Errorf("enrich pool: %w", err)
		}
		a.enrichDB = es
	}
	ec := a.cfg.Enricher
	ec.Conn, ec.Store = nc, enrichStore{Store: s, recall: a.enrichDB}
	var obs enrichObservers
	if a.metrics != nil {
		obs = append(obs, a.metrics)
	}
	if a.pressure != nil {
		obs = append(obs, a.pressure)
	}
	if qe, err := a.queryEmbedder(); err != nil {
		return err
	} else if qe != nil {
		ec.Embedder = qe
		if a.worker != nil {
			// The same server as the worker's embed jobs.
			obs = append(obs, embedAnswers{a.worker})
		}
	}
	if len(obs) > 0 {
		ec.Observer = obs
	}
	w := a.worker
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// The clears of the memory tools (clear, facts.clear, context.update)
	// record the turn stream's position, so that they cover every turn
	// published before them, however late it is stamped.
	s.SetTurnStream(clearPosition(worker.TurnStreamPosition(js, a.cfg.Stream), a.cfg.Stream, a.logger))
	// The enrich service's stop ends a forget in progress, even one past
	// its own deadline (worker.WithStop), with its other requests: after
	// counting them, so that a forget it cancels fails the stop (a cancel
	// of its own at the deadline raced that count: a CI run).
	var svc *enricher.Service // set before Start, so before any request
	ec.Forget = func(ctx context.Context, userID string) (events.ForgetReply, error) {
		r, err := a.forget(worker.WithStop(ctx, svc.Halted()), w, js, s, userID)
		var (
			ie *worker.IncompleteError
			ns *worker.NoTurnStreamError
		)
		switch {
		case errors.As(err, &ie):
			// What happened and what to do, for the requester.
			a.logger.ErrorContext(ctx, "forget did not finish after the memory was deleted", "left", ie.What, "error", ie.Err)
			err = &events.ServiceError{Code: 500, Description: ie.Error()}
		case errors.As(err, &ns):
			a.logger.WarnContext(ctx, "forget refused: no turn stream", "stream", ns.Stream)
			err = &events.ServiceError{Code: 500, Description: ns.Error()}
		}
		return r, err
	}
	switch {
	case w != nil:
		ec.DocIndexer = w.EnqueueIndexDocument
	case a.enqueuer != nil:
		ec.DocIndexer = a.enqueuer.EnqueueIndexDocument
	}
	ec.DocJobs = worker.DocumentJobs()
	if ec.TracerProvider, err = a.tracerLocked(); err != nil {
		return err
	}
	if svc, err = enricher.New(ec); err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return err
	}
	a.enrich = svc
	return nil
}

// warnUnfinishedResets logs each replay --reset that has not read the
// stream back (store.ResetMark): its users have only part of their memory
// until a replay reads it, which nothing else would tell an operator who
// did not see that replay stop.
func (a *App) warnUnfinishedResets(ctx context.Context, s *store.Store) {
	marks, err := s.UnfinishedResets(ctx)
	if err != nil {
		a.logger.WarnContext(ctx, "cannot list unfinished replay resets", "error", err)
		return
	}
	for _, m := range marks {
		users := "all"
		if m.Users > 0 {
			users = strconv.Itoa(m.Users)
		}
		a.logger.WarnContext(ctx, "a replay --reset has not read the stream back (it is running, or it stopped): its users have only part of their memory until a replay reads it (memoryd replay with the same --user, or none for every user)",
			"reset_at", m.StartedAt, "users", users)
	}
}

// warnOtherExtractors says at start when live processes extract with
// another extractor than ext (the offline rules beside a model, another
// model): River gives a turn's job to any of them, and one that takes
// over a dead process's jobs extracts them with its own, so the turns'
// memory is of either; and replay refuses to run beside them.
func (a *App) warnOtherExtractors(ctx context.Context, s *store.Store, ext worker.Extractor) {
	live, err := s.LiveExtractors(ctx, cmp.Or(a.cfg.Worker.ProcessTimeout, 10*time.Second))
	if err != nil {
		a.logger.WarnContext(ctx, "cannot list the running processes' extractors", "error", err)
		return
	}
	own := worker.ExtractorID(ext.Info())
	for _, other := range live {
		if other != own {
			a.logger.WarnContext(ctx, "other running processes extract with another extractor (or one did until it stopped in the last few seconds): each turn's memory is extracted by whichever process takes its job; give every process the same --llm-base-url and --llm-model",
				"extractor", own, "other_extractor", other)
		}
	}
}

// warnEmbedlessSearch says at start when this process answers enrich and
// search without embeddings while running workers embed: the memory.*
// requests go to whichever serve takes them, so the same request finds
// items by meaning on the others and by keywords only on this one (an
// operator's walk: a serve started without MEMORYD_EMBED_BASE_URL beside
// two that had it dropped an item found by meaning from one reply in
// three, and said so only at info level).
func (a *App) warnEmbedlessSearch(ctx context.Context, s *store.Store) {
	if a.cfg.Embed.BaseURL != "" {
		return
	}
	models, err := s.LiveEmbedModels(ctx, cmp.Or(a.cfg.Worker.ProcessTimeout, 10*time.Second))
	if err != nil {
		a.logger.WarnContext(ctx, "cannot list the running processes' embedding models", "error", err)
		return
	}
	if len(models) > 0 {
		a.logger.WarnContext(ctx, "other running processes embed (or one did until it stopped in the last few seconds) but this one has no --embed-base-url: the enrich and search requests it takes find items by keywords only, those the others take by meaning too, so the same request is answered differently; give every serve the same --embed-base-url and --embed-model",
			"embed_models", models)
	}
}

// warnAutovacuumOff says at start when the server runs no autovacuum:
// docs/operations.md asks for it, and without it the outbox, River's jobs
// and the turns grow dead rows at the rate of ingest, slowly enough that
// nothing else would point at the cause.
func (a *App) warnAutovacuumOff(ctx context.Context, s *store.Store) {
	off, err := s.AutovacuumOff(ctx)
	if err != nil {
		a.logger.WarnContext(ctx, "cannot read the autovacuum setting", "error", err)
		return
	}
	if off {
		a.logger.WarnContext(ctx, "autovacuum is off on this Postgres server (or track_counts is): memoryd's change outbox, River's jobs and the turns leave dead rows at the rate of ingest, which then grow the tables and slow their reads; turn it on (autovacuum = on, track_counts = on) or vacuum memoryd's tables on a schedule")
	}
}

// warnVacuumDenied says at start when the role may not VACUUM the tables
// the prune vacuums: Postgres skips them with a warning memoryd never
// sees, and the size limit then bounds an estimate, not the files.
func (a *App) warnVacuumDenied(ctx context.Context, s *store.Store) {
	role, tables, err := s.VacuumDenied(ctx)
	if err != nil {
		a.logger.WarnContext(ctx, "cannot read the VACUUM privilege on memoryd's tables", "error", err)
		return
	}
	if msg := store.VacuumDeniedMessage(role, tables); msg != "" {
		a.logger.WarnContext(ctx, msg)
	}
}

// OpsListenError is Start failing to listen on Ops.Addr.
type OpsListenError struct {
	Addr string
	Err  error
}

func (e *OpsListenError) Error() string { return fmt.Sprintf("ops endpoint %s: %v", e.Addr, e.Err) }
func (e *OpsListenError) Unwrap() error { return e.Err }

// forgetReply is the one mapping from the worker's forget result to the
// memory.forget reply.
func forgetReply(r worker.ForgetResult) events.ForgetReply {
	return events.ForgetReply{Facts: r.Facts, FactHistory: r.FactHistory, Context: r.Context, Turns: r.Turns,
		Jobs: r.Jobs, StreamEvents: r.StreamEvents, DeadLetters: r.DeadLetters, Documents: r.Documents}
}

// logJobSize warns when the job size asked for is over what a job can
// hold: ingest makes a job of the turns of one batch, so a job size set
// above the batch size (a memoryd.yaml shared with replay, whose
// transactions are larger) gives jobs of the batch size.
func (a *App) logJobSize(ctx context.Context) {
	if a.jobSize > a.cfg.Worker.JobSize {
		a.logger.WarnContext(ctx, "job size is over the ingest batch size: ingest's jobs hold the turns of one batch, so they hold at most the batch size (--batch-size)",
			"job_size", a.jobSize, "batch_size", a.cfg.Worker.BatchSize)
	}
}

func (a *App) logExtractor(ctx context.Context, ext worker.Extractor) {
	info := ext.Info()
	if a.cfg.LLM.BaseURL == "" {
		a.logger.Info("extractor: offline rules (stores turns verbatim, picks up simple self-statements); set --llm-base-url to use a model", "extractor", info.Name)
		return
	}
	a.logger.Info("extractor: LLM", "extractor", info.Name, "model", info.Model, "base_url", RedactURL(a.cfg.LLM.BaseURL))
	p, ok := ext.(interface {
		Models(context.Context) ([]string, error)
	})
	if !ok {
		return
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	models, err := p.Models(pingCtx)
	status := extractor.HTTPStatus(err)
	switch {
	case err == nil && len(models) > 0 && !extractor.ListsModel(models, a.cfg.LLM.Model):
		// Not fatal: some servers serve aliases they do not list. But a
		// model name mistyped, or not pulled, holds every turn (a 404 is
		// waited for as an outage), and nothing else says why.
		attrs := []any{"base_url", RedactURL(a.cfg.LLM.BaseURL), "model", a.cfg.LLM.Model, "listed", len(models), "some_listed", models[:min(len(models), 5)]}
		if same := extractor.SameNameModels(models, a.cfg.LLM.Model); len(same) > 0 {
			// Ollama's name without the tag pulled ("qwen3" is
			// "qwen3:latest"): the tags it has, wherever they are listed.
			attrs = append(attrs, "same_name", same[:min(len(same), 5)])
		}
		a.logger.Warn("the LLM endpoint does not list the model --llm-model names: extraction waits for it, up to --llm-max-outage per job, then fails, if it does not serve it (check the name, or pull the model); some servers serve aliases they do not list", attrs...)
	case err == nil:
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Named by where the key came from: a key file is read again
		// when it changes (a walk with --llm-api-key-file was pointed at
		// --llm-api-key, and a restart).
		fix := "--llm-api-key (MEMORYD_LLM_API_KEY) is one it takes, given at a restart"
		if a.cfg.LLM.APIKeyFile != "" {
			fix = "--llm-api-key-file holds one it takes (read again when it changes, no restart)"
		}
		a.logger.Warn("the LLM endpoint refused the API key: extraction waits, up to --llm-max-outage per job, then fails, until "+fix,
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "status", status)
	case (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) && !strings.HasSuffix(strings.TrimRight(a.cfg.LLM.BaseURL, "/"), "/v1"):
		// The usual mistake: a base URL without its /v1 (Ollama's
		// http://localhost:11434), where chat completions 404 too.
		a.logger.Warn("the LLM endpoint has no model list there: check --llm-base-url, which usually ends in /v1 (e.g. http://localhost:11434/v1); extraction waits, up to --llm-max-outage per job, then fails, until it is right",
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "status", status)
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		// Servers that serve chat completions without a model list:
		// reachable, which is all the check asks.
		a.logger.Info("the LLM endpoint answers (it lists no models: the first extraction tells whether the model is there)",
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "status", status)
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		// A proxy in front of a model server that is down, or one loading
		// its model: extraction treats these as an outage (waits without
		// spending attempts), and so does this check.
		a.logger.Warn("the LLM endpoint is down or loading its model (a gateway before it said so); extraction waits for it without spending attempts, up to --llm-max-outage per job",
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "status", status, "max_model_outage", a.cfg.Worker.MaxModelOutage.String())
	case status != 0:
		a.logger.Warn("the LLM endpoint answered the model list with an error; extraction may fail",
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "status", status, "error", err)
	default:
		// Not fatal: turns wait in the stream and the turns table, and a
		// job whose model server does not answer is snoozed without
		// spending attempts, up to Worker.MaxModelOutage.
		a.logger.Warn("the LLM endpoint does not answer; extraction waits for it without spending attempts, up to --llm-max-outage per job, then retries with backoff until its attempts run out. Check --llm-base-url (it usually ends in /v1) and that the model server runs",
			"base_url", RedactURL(a.cfg.LLM.BaseURL), "max_model_outage", a.cfg.Worker.MaxModelOutage.String(), "error", err)
	}
}

// logEmbeddings says at start whether memory is embedded and searched by
// meaning, and with which model: nothing else would tell until a sweep
// logs, or an enrich finds by meaning.
func (a *App) logEmbeddings(ctx context.Context) {
	if a.cfg.Embed.BaseURL == "" {
		a.logger.InfoContext(ctx, "embeddings: off (retrieval by keywords only); set --embed-base-url to search by meaning too")
		return
	}
	a.logger.InfoContext(ctx, "embeddings: on", "model", a.cfg.Embed.StoredModel(), "base_url", RedactURL(a.cfg.Embed.BaseURL))
}

// Stop shuts down in dependency order: stop pulling turns and let running
// jobs finish (until ctx ends) while enrich still answers, then stop
// answering, then close the connections. It is safe to call on an App that never started.
func (a *App) Stop(ctx context.Context) error {
	// The endpoint first, without the lock: its handlers (readiness,
	// metrics) take it, and shutting down waits for them. Looked up again
	// under the lock, in case a Start running beside this Stop set it.
	var errs []error
	for {
		a.mu.Lock()
		ops := a.ops
		a.ops = nil
		if ops == nil {
			defer a.mu.Unlock()
			return errors.Join(append(errs, a.stopLocked(ctx))...)
		}
		a.mu.Unlock()
		errs = append(errs, ops.stop(ctx))
	}
}

// enrichStopReserve is the part of Stop's time, at most a quarter of it,
// kept from the worker's wait for the enrich service's requests.
const enrichStopReserve = 5 * time.Second

// stopLocked stops everything but the endpoint; a.mu is held.
func (a *App) stopLocked(ctx context.Context) error {
	var errs []error
	// The worker before the enrich service: its stop waits (up to ctx) for
	// running extraction jobs, whose model calls can take their whole
	// timeout, and enrich keeps answering meanwhile. Stopped first, a
	// restart of a lone serve answered no request for that long (a soak:
	// 25-31 s, 90-98 failed requests a restart). A forget meanwhile needs
	// the worker's stream and store only, not River.
	if a.worker != nil {
		// The worker's wait ends before the deadline by a reserve, so that
		// enrich can still answer, or be waited for, the requests it took
		// meanwhile: a deadline spent by the jobs alone is no failure.
		wctx := ctx
		if d, ok := ctx.Deadline(); ok && a.enrich != nil {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, d.Add(-min(enrichStopReserve, time.Until(d)/4)))
			defer cancel()
		}
		errs = append(errs, a.worker.Stop(wctx))
		a.worker = nil
	}
	if a.enrich != nil {
		errs = append(errs, a.enrich.Stop(ctx))
		a.enrich = nil
	}
	a.enqueuer = nil
	if a.presence != nil {
		errs = append(errs, a.presence.Stop(ctx))
		a.presence = nil
	}
	if a.follower != nil {
		errs = append(errs, a.follower.Stop(ctx))
		a.follower = nil
	}
	if a.changes != nil {
		errs = append(errs, a.changes.Stop(ctx))
		a.changes = nil
		a.publisher.Store(nil)
	}
	if a.nc != nil {
		if a.ownsNC {
			// Drain delivers what was received and flushes what was
			// published; Stop returns once the connection has closed.
			if err := a.nc.Drain(); err != nil {
				a.nc.Close()
			}
			select {
			case <-a.ncClosed:
			case <-ctx.Done():
				a.nc.Close()
			}
		}
		a.nc = nil
	}
	if a.enrichDB != nil {
		a.enrichDB.Close()
		a.enrichDB = nil
	}
	if a.store != nil {
		a.store.Close()
		a.store, a.migrated, a.publishing = nil, false, false
	}
	// Last: the spans of everything stopped above are flushed.
	if a.tracer != nil {
		// Spans lost to a collector that is down or slow are not a failed
		// stop: everything else stopped cleanly, and an exit status 1
		// would mark the unit failed at every restart (docs/operations.md,
		// "Traces": an unreachable endpoint loses spans, never requests).
		if err := a.tracer.Shutdown(ctx); err != nil {
			a.logger.Warn("traces still buffered at stop were not all exported", "error", err)
		}
		a.tracer = nil
		// The LLM extractor holds the provider just shut down: a Start
		// after this builds it again on the new one, or its model calls
		// would make no span.
		if a.cfg.LLM.BaseURL != "" {
			a.ext = nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// Health checks Postgres, NATS and, in a process that runs the worker, the
// JetStream consumer the workers share, the ingest, the model server and
// (with embeddings) the embeddings server, each bounded; every check is
// "ok" or what is wrong.
func (a *App) Health(ctx context.Context) map[string]string {
	a.mu.Lock()
	s, nc := a.store, a.nc
	a.mu.Unlock()
	// Each check has its own 2 s, Postgres's beside the others: a
	// Postgres that hangs (not refusing: packets dropped) must not spend
	// the consumer check's time and have it blamed too.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pg := make(chan string, 1)
	go func() {
		err := errNotStarted
		if s != nil {
			err = s.Ping(ctx)
		}
		if err != nil {
			pg <- err.Error()
			return
		}
		pg <- "ok"
	}()
	checks := a.natsHealth(ctx, nc)
	checks["postgres"] = <-pg
	if runWorker, _ := a.cfg.Role.runs(); runWorker {
		var embed string
		checks["ingest"], checks["model"], embed = a.workerHealth(time.Now())
		if a.cfg.Embed.BaseURL != "" {
			checks["embeddings"] = embed
		}
	}
	return checks
}

// ingestUnready is how long the ingest may fail every batch before the
// health check says so: past the longest backoff (30 s), so that a lock
// timeout or a Postgres restart does not flip readiness, and a database
// that answers pings but takes no turns (a disk-full walk: a full disk,
// /readyz 200 for as long) does.
const ingestUnready = time.Minute

// workerHealth is the ingest's, the model's and the embeddings server's
// health checks at now: "ok", or how long each has failed and why.
func (a *App) workerHealth(now time.Time) (ingest, model, embed string) {
	a.mu.Lock()
	w := a.worker
	a.mu.Unlock()
	if w == nil {
		return "ok", "ok", "ok" // not started yet, or stopped: the other checks say so
	}
	return ingestCheck(w.IngestFailing(), now), modelCheck(w.ModelRefusing(), now), embedCheck(w.EmbedRefusing(), now)
}

// embedCheck is the embeddings server's health at now given its refusal r
// (nil for none), as modelCheck is the model server's: a server refusing
// memoryd's key or model for ingestUnready makes every embed job wait, for
// --llm-max-outage, and then fail, new items searched lexically only.
func embedCheck(r *worker.Outage, now time.Time) string {
	return outageCheck(r, now, "the embeddings server refuses memoryd's API key or model",
		"embed jobs wait, new items lexical-only; write the new key to --embed-api-key-file, or fix --embed-api-key, --embed-model, --embed-base-url or --embed-dimensions and restart")
}

// modelCheck is the model's health at now given its refusal r (nil for
// none): a server refusing memoryd's key or model for ingestUnready (a
// key revoked, a model removed, a rollout with a wrong key) makes every
// extraction wait, for --llm-max-outage, and then fail.
func modelCheck(r *worker.Outage, now time.Time) string {
	return outageCheck(r, now, "the model server refuses memoryd's API key or model", "extraction waits; write the new key to --llm-api-key-file, or fix --llm-api-key, --llm-model or --llm-base-url and restart")
}

// ingestCheck is the ingest's health at now given its outage f (nil for
// none).
func ingestCheck(f *worker.Outage, now time.Time) string {
	return outageCheck(f, now, "cannot record turns", "they wait in the stream")
}

// outageCheck is "ok", or, once o has lasted ingestUnready, what fails
// (what), for how long, what it means (hint) and the last error.
func outageCheck(o *worker.Outage, now time.Time, what, hint string) string {
	if o == nil || now.Sub(o.Since) < ingestUnready {
		return "ok"
	}
	return fmt.Sprintf("%s for %s (%s): %s", what, now.Sub(o.Since).Round(time.Second), hint, o.Err)
}

// pingWithin makes a round trip to the NATS server (events.Client.Ping)
// within a second, half of a health check's time, so that the consumer
// check after it still has its own.
func pingWithin(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return events.NewClient(nc, "").Ping(ctx)
}

// notConnected is the nats check of a connection that is not connected:
// its status, and the last reconnect's error when it has one. nats.go
// reports a reconnect whose TLS handshake failed here (the server's
// certificate expired, or of a CA memoryd does not trust) to no handler,
// so that neither the log nor /readyz said why (a review: "not connected:
// RECONNECTING" alone, while every reconnect failed to verify the
// server's certificate).
func notConnected(nc *nats.Conn) string {
	s := "not connected: " + nc.Status().String()
	if err := nc.LastError(); err != nil {
		s += " (last error: " + err.Error() + ")"
	}
	return s
}

// natsHealth is Health's NATS checks: the connection, and, in a process
// that consumes the stream, its durable consumer (a process of role
// enrich does not: whether it exists is the ingest processes' readiness).
func (a *App) natsHealth(ctx context.Context, nc *nats.Conn) map[string]string {
	checks := map[string]string{"nats": "ok"}
	runWorker, _ := a.cfg.Role.runs()
	if runWorker {
		checks["consumer"] = "ok"
	}
	if nc == nil {
		for k := range checks {
			checks[k] = errNotStarted.Error()
		}
		return checks
	}
	if !nc.IsConnected() {
		checks["nats"] = notConnected(nc)
	} else if err := pingWithin(ctx, nc); err != nil && !nc.IsConnected() {
		// Lost while the ping was in flight ("nats: connection closed"):
		// told as not connected, not as connected and silent at once.
		checks["nats"] = notConnected(nc)
	} else if err != nil {
		// Connected as far as the client knows, but the server (or the
		// path to it) does not answer: a hung server, a lost host or a
		// partition, which the client's pings find only later. Requests
		// and turns do not reach this process meanwhile.
		checks["nats"] = "connected, but the server does not answer: " + err.Error()
	}
	if !runWorker {
		return checks
	}
	if !nc.IsConnected() {
		// The lookup below cannot be sent: it would wait out the check's
		// time and say only "context deadline exceeded" (an operator's
		// walk: each /readyz took 2 s through a NATS outage).
		checks["consumer"] = "not looked up: NATS is not connected"
		return checks
	}
	js, err := jetstream.New(nc)
	deferred := false
	if err == nil {
		deferred = events.InfoDeferred(js)
		_, err = js.Consumer(ctx, a.cfg.Stream, a.cfg.Worker.Durable)
	}
	now := time.Now()
	if err == nil {
		a.consumerSeen.Store(now.UnixNano())
	}
	var seen time.Time
	if n := a.consumerSeen.Load(); n != 0 {
		seen = time.Unix(0, n)
	}
	checks["consumer"] = consumerCheck(err, checks["nats"] == "ok", deferred, seen, now)
	return checks
}

// consumerBusyGrace is how long after the consumer was last found a
// lookup that timed out on a busy server still counts as found.
const consumerBusyGrace = 5 * time.Minute

// consumerCheck is the consumer check given the lookup's error (nil: found),
// whether the server answered the ping, whether it answers info requests
// after every other API request (events.InfoDeferred: nats-server 2.11
// and later), and when the consumer was last found. A lookup that timed out
// on such a server that answers pings, within consumerBusyGrace of the
// consumer's last finding, is "ok": the server is busy with other API
// requests (forgets' deletes held one 30 s on 2.15.2), not without the
// consumer, and ingest and enrich go on. Before, /readyz answered 503
// beside large forgets, and a balancer took the process out of rotation.
func consumerCheck(err error, pinged, deferred bool, seen, now time.Time) string {
	switch {
	case err == nil:
		return "ok"
	case pinged && deferred && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) &&
		!seen.IsZero() && now.Sub(seen) < consumerBusyGrace:
		return "ok"
	}
	return err.Error()
}

// Stats returns the running worker's ingestion counters, zero when not
// started.
func (a *App) Stats() worker.Stats {
	a.mu.Lock()
	w := a.worker
	a.mu.Unlock()
	if w == nil {
		return worker.Stats{}
	}
	return w.Stats()
}

// OpsAddr is the address the operators' endpoint listens on, empty when it
// does not run.
func (a *App) OpsAddr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ops == nil {
		return ""
	}
	return a.ops.ln.Addr().String()
}

var errNotStarted = errors.New("not started")

// Migrate opens the store (creating the database when Store.CreateDatabase
// is set) and applies River's and memoryd's migrations; it returns the
// versions it applied, none when the schema was up to date.
// NewerMigrations lists the migrations the database has that this memoryd
// does not know (a newer memoryd applied them), none when it knows all.
func (a *App) NewerMigrations(ctx context.Context) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.openStore(ctx, false)
	if err != nil {
		return nil, err
	}
	return s.NewerMigrations(ctx, migrations.FS)
}

func (a *App) Migrate(ctx context.Context) ([]int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.openStore(ctx, false)
	if err != nil {
		return nil, err
	}
	applied, err := s.Migrate(ctx, migrations.FS, a.logger)
	if err != nil {
		return nil, err
	}
	a.migrated = true
	return applied, nil
}

// PendingMigrationsError is Start, Replay or EmbedBackfill refusing a
// database with migrations pending when Config.NoMigrate is set.
type PendingMigrationsError struct {
	Pending store.Pending
	// Empty is set when every migration of memoryd's is pending: a
	// database memoryd never migrated.
	Empty bool
}

func (e *PendingMigrationsError) Error() string {
	if e.Empty && len(e.Pending.Memoryd) > 0 {
		// Sixty names in one line say less than this (a first-start walk).
		return fmt.Sprintf("the database holds no memoryd schema yet (all %d of memoryd's migrations, %s to %s, are pending); run memoryd migrate with this version first, or run without --migrate=false",
			len(e.Pending.Memoryd), e.Pending.Memoryd[0], e.Pending.Memoryd[len(e.Pending.Memoryd)-1])
	}
	what := make([]string, 0, 2)
	if n := len(e.Pending.River); n > 0 {
		what = append(what, fmt.Sprintf("River's (%s)", strings.Join(e.Pending.River, "; ")))
	}
	if n := len(e.Pending.Memoryd); n > 0 {
		what = append(what, fmt.Sprintf("memoryd's %s", strings.Join(e.Pending.Memoryd, ", ")))
	}
	return fmt.Sprintf("the database has migrations pending: %s; run memoryd migrate with this version first (this command was told not to migrate: --migrate=false)", strings.Join(what, " and "))
}

// clearPositionTimeout bounds the read of the turn stream's position a
// clear makes before its transaction.
const clearPositionTimeout = 2 * time.Second

// clearPosition reads the turn stream's position for a clear within
// clearPositionTimeout. When JetStream cannot say, the clear is not
// refused: it records no position and covers turns by their timestamps
// alone, as clears did before they recorded positions, and a warning
// says so.
func clearPosition(read store.TurnStreamFunc, stream string, logger *slog.Logger) store.TurnStreamFunc {
	return func(ctx context.Context) (store.StreamPosition, error) {
		rctx, cancel := context.WithTimeout(ctx, clearPositionTimeout)
		defer cancel()
		p, err := read(rctx)
		if err != nil {
			logger.Warn("cannot read the turn stream; this clear covers turns by their timestamps only", "stream", stream, "error", err)
			return store.StreamPosition{}, nil
		}
		return p, nil
	}
}
