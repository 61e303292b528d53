package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// version is memoryd's SemVer, reported by the micro service.
const version = "0.1.0"

// serveOptions are the settings of the long-running service.
type serveOptions struct {
	conn            connOptions
	createDB        bool
	workers         int
	batchSize       int
	maxAttempts     int
	jobSize         int
	jobTimeout      time.Duration
	ackWait         time.Duration
	shutdownTimeout time.Duration
	enrichTimeout   time.Duration
	debounce        time.Duration
	maxDBSize       string
	maxPerUser      int
	pruneInterval   time.Duration
	turnRetention   time.Duration
	httpAddr        string
	pprof           bool
	llm             llmOptions
}

type llmOptions struct {
	baseURL        string
	apiKey         string
	model          string
	timeout        time.Duration
	concurrency    int
	rps            float64
	burst          int
	responseFormat string
}

// check refuses values no component could use before anything connects,
// naming the flag (exit 2). Zero is not "the default" here: the help shows
// each default, and a 0 the user typed is a mistake, not a request for it.
func (o *serveOptions) check(f *flags) error {
	if _, err := parseSize(o.maxDBSize); err != nil {
		return f.usageErr("--max-db-size: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.conn.logLevel)); err != nil {
		return f.usageErr("--log-level %q is not debug, info, warn or error", o.conn.logLevel)
	}
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"--workers", o.workers < 1},
		{"--batch-size", o.batchSize < 1},
		{"--max-attempts", o.maxAttempts < 1},
		{"--job-size", o.jobSize < 0},
		{"--job-timeout", o.jobTimeout <= 0},
		{"--ack-wait", o.ackWait <= 0},
		{"--shutdown-timeout", o.shutdownTimeout <= 0},
		{"--enrich-timeout", o.enrichTimeout <= 0},
		{"--extract-debounce", o.debounce < 0},
		{"--max-context-per-user", o.maxPerUser < 0},
		{"--prune-interval", o.pruneInterval <= 0},
	} {
		if c.bad {
			v := f.Lookup(strings.TrimPrefix(c.name, "--")).Value.String()
			return f.usageErr("%s %s is out of range", c.name, v)
		}
	}
	if o.llm.baseURL != "" && o.llm.model == "" {
		return f.usageErr("--llm-model is required with --llm-base-url")
	}
	return nil
}

func (o *serveOptions) register(f *flags) {
	o.conn.register(f)
	f.Bool(&o.createDB, "create-database", true, "create the Postgres database when it does not exist")
	f.Int(&o.workers, "workers", 20, "extraction jobs run at once by this process")
	f.Int(&o.batchSize, "batch-size", 200, "most turn events recorded in one transaction")
	f.Int(&o.maxAttempts, "max-attempts", 5, "extraction attempts before a turn is marked failed")
	f.Int(&o.jobSize, "job-size", 0, "turns per extraction job; 0 picks 50 for the offline extractor and 1 for an LLM (parallel model calls)")
	f.Duration(&o.jobTimeout, "job-timeout", 10*time.Minute, "bound on one extraction job; a job still running after twice this in a live process is retried (the jobs of a process that died are taken over within about 10s)")
	f.Duration(&o.ackWait, "ack-wait", 30*time.Second, "how long JetStream waits for an ingest ack before redelivering (to another process)")
	f.Duration(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long running jobs may take to finish on SIGINT/SIGTERM before they are handed back")
	f.Duration(&o.enrichTimeout, "enrich-timeout", 250*time.Millisecond, "bound on an enrich reply; past it the reply is empty and marked degraded")
	f.Duration(&o.debounce, "extract-debounce", 0, "wait this long after a turn so a burst in one conversation is extracted in one LLM call (0: every turn at once)")
	f.String(&o.maxDBSize, "max-db-size", "", "bound on the live size of memoryd's tables: over it the oldest context items are pruned, never more than the excess; a limit below what pruning can reach is refused at start (e.g. 500M or 10G; empty: no limit)")
	f.Int(&o.maxPerUser, "max-context-per-user", 0, "keep at most this many context items per user, pruning the oldest (0: no cap)")
	f.Duration(&o.pruneInterval, "prune-interval", 10*time.Minute, "how often the size limits and the turn retention are applied")
	f.Duration(&o.turnRetention, "turn-retention", worker.DefaultTurnRetention, "how long a processed turn keeps its text in Postgres (the stream keeps the event; replay restores it); 0 keeps it forever")
	f.String(&o.httpAddr, "http", "", "address for /metrics, /healthz and /readyz, e.g. 127.0.0.1:9090 or :9090 (empty: off)")
	f.Bool(&o.pprof, "pprof", false, "also serve Go pprof under /debug/pprof/ on --http")
	o.llm.register(f)
}

func (o *llmOptions) register(f *flags) {
	f.String(&o.baseURL, "llm-base-url", "", "OpenAI-compatible API base URL, e.g. http://127.0.0.1:11434/v1; empty uses the offline rule-based extractor")
	f.Secret(&o.apiKey, "llm-api-key", "API key for the LLM server")
	f.String(&o.model, "llm-model", "", "model name (required with --llm-base-url)")
	f.Duration(&o.timeout, "llm-timeout", 60*time.Second, "timeout of one LLM request")
	f.Int(&o.concurrency, "llm-concurrency", 4, "LLM requests in flight at once (over all jobs of this process)")
	f.Float(&o.rps, "llm-rps", 0, "LLM requests per second, retries included (0: unlimited); a 429 pauses all requests")
	f.Int(&o.burst, "llm-burst", 1, "requests allowed at once above --llm-rps")
	f.String(&o.responseFormat, "llm-response-format", "json_schema", "json_schema, json_object or none (for servers that reject structured output)")
}

// effectiveJobSize is --job-size, or its automatic value: small jobs for an
// LLM so the model calls run in parallel, large ones for the offline rules so
// per-job overhead does not dominate.
func (o *serveOptions) effectiveJobSize(llm, rules int) int {
	switch {
	case o.jobSize > 0:
		return min(o.jobSize, max(o.batchSize, 1))
	case o.llm.baseURL != "":
		return llm
	}
	return min(rules, max(o.batchSize, 1))
}

// extractor builds the configured extractor: the LLM when a base URL is set,
// the offline rules otherwise.
func (o *llmOptions) extractor(logger *slog.Logger) (worker.Extractor, error) {
	if o.baseURL == "" {
		return extractor.NewRules(), nil
	}
	if o.model == "" {
		return nil, errors.New("--llm-model is required with --llm-base-url")
	}
	return extractor.NewLLM(extractor.LLMConfig{
		Logger:            logger,
		BaseURL:           o.baseURL,
		APIKey:            o.apiKey,
		Model:             o.model,
		Timeout:           o.timeout,
		MaxConcurrency:    o.concurrency,
		RequestsPerSecond: o.rps,
		Burst:             o.burst,
		ResponseFormat:    o.responseFormat,
	})
}

func runServe(ctx context.Context, a *app, args []string) error {
	var o serveOptions
	f := newFlags("serve", "Usage: memoryd serve [flags]\n\nRuns the ingest consumer, the River extraction workers and the enrich service until SIGINT/SIGTERM.")
	o.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	if err := o.check(f); err != nil {
		return err
	}
	logger, err := o.conn.logger(a)
	if err != nil {
		return err
	}
	svc, err := startService(ctx, &o, logger)
	if err != nil {
		return err
	}
	<-ctx.Done()
	logger.Info("shutting down", "timeout", o.shutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	return svc.stop(stopCtx)
}

// service is a running memoryd: store, NATS, worker and enrich service.
type service struct {
	store   *store.Store
	nc      *nats.Conn
	worker  *worker.Worker
	enrich  *enricher.Service
	ops     *opsServer
	metrics *metrics
	logger  *slog.Logger
}

func startService(ctx context.Context, o *serveOptions, logger *slog.Logger) (svc *service, err error) {
	ext, err := o.llm.extractor(logger)
	if err != nil {
		return nil, err
	}
	info := ext.Info()
	if info.Name == "rules" {
		logger.Info("extractor: offline rules (stores turns verbatim, picks up simple self-statements); set --llm-base-url to use a model", "extractor", info.Name)
	} else {
		logger.Info("extractor: LLM", "extractor", info.Name, "model", info.Model, "base_url", redactURL(o.llm.baseURL))
		if p, ok := ext.(interface{ Ping(context.Context) error }); ok {
			pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := p.Ping(pingCtx); err != nil {
				// Not fatal: jobs retry with backoff and turns wait in the
				// stream and the turns table until the model is reachable.
				logger.Warn("the LLM endpoint does not answer; extraction will retry until it does. Check --llm-base-url (it usually ends in /v1) and that the model server runs",
					"base_url", redactURL(o.llm.baseURL), "error", err)
			}
			cancel()
		}
	}
	svc = &service{logger: logger, metrics: newMetrics()}
	llm, _ := ext.(usageReporter) // nil with the offline extractor
	svc.metrics.reg.MustRegister(newServiceCollector(svc, llm))
	defer func() {
		if err != nil {
			svc.stop(context.WithoutCancel(ctx))
		}
	}()
	if svc.store, err = o.conn.openStore(ctx, o.createDB, logger); err != nil {
		return svc, err
	}
	if _, err = svc.store.Migrate(ctx, migrations.FS, logger); err != nil {
		return svc, err
	}
	if svc.nc, err = o.conn.connectNATS("memoryd", logger); err != nil {
		return svc, err
	}
	maxDBSize, err := parseSize(o.maxDBSize)
	if err != nil {
		return svc, err
	}
	svc.worker, err = worker.New(worker.Config{
		Conn:        svc.nc,
		Store:       svc.store,
		Extractor:   ext,
		Logger:      logger,
		Observer:    svc.metrics,
		Prefix:      o.conn.prefix,
		Stream:      o.conn.stream,
		BatchSize:   o.batchSize,
		Workers:     o.workers,
		MaxAttempts: o.maxAttempts,
		JobSize:     o.effectiveJobSize(1, 50),
		JobTimeout:  o.jobTimeout,
		AckWait:     o.ackWait,

		ExtractDebounce:   o.debounce,
		MaxDBSize:         maxDBSize,
		MaxContextPerUser: o.maxPerUser,
		PruneInterval:     o.pruneInterval,
		TurnRetention:     cmp.Or(max(o.turnRetention, 0), -1), // 0 keeps the text forever
	})
	if err != nil {
		return svc, err
	}
	if err = svc.worker.Start(ctx); err != nil {
		svc.worker = nil
		if floor := (*worker.SizeFloorError)(nil); errors.As(err, &floor) {
			err = errors.New(floor.Describe("--max-db-size"))
		}
		return svc, err
	}
	svc.enrich, err = enricher.New(enricher.Config{
		Conn:     svc.nc,
		Store:    svc.store,
		Prefix:   o.conn.prefix,
		Version:  version,
		Timeout:  o.enrichTimeout,
		Logger:   logger,
		Observer: svc.metrics,
		Forget: func(ctx context.Context, userID string) (events.ForgetReply, error) {
			r, err := svc.worker.Forget(ctx, userID)
			return events.ForgetReply{Facts: r.Facts, FactHistory: r.FactHistory, Context: r.Context, Turns: r.Turns,
				Jobs: r.Jobs, StreamEvents: r.StreamEvents, DeadLetters: r.DeadLetters}, err
		},
	})
	if err != nil {
		return svc, err
	}
	if err = svc.enrich.Start(ctx); err != nil {
		svc.enrich = nil
		return svc, err
	}
	if o.httpAddr != "" {
		if svc.ops, err = startOps(o.httpAddr, o.pprof, svc, o, svc.metrics, logger); err != nil {
			return svc, fmt.Errorf("--http %s: %w", o.httpAddr, err)
		}
	}
	return svc, nil
}

// stop shuts down in dependency order: stop answering and pulling first, then
// let jobs finish, then close connections.
func (svc *service) stop(ctx context.Context) error {
	var errs []error
	if svc.ops != nil {
		errs = append(errs, svc.ops.stop(ctx))
	}
	if svc.enrich != nil {
		errs = append(errs, svc.enrich.Stop(ctx))
	}
	if svc.worker != nil {
		errs = append(errs, svc.worker.Stop(ctx))
	}
	if svc.nc != nil {
		if err := svc.nc.Drain(); err != nil {
			svc.nc.Close()
		}
	}
	if svc.store != nil {
		svc.store.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	svc.logger.Info("stopped")
	return nil
}

func runMigrate(ctx context.Context, a *app, args []string) error {
	var o connOptions
	f := newFlags("migrate", "Usage: memoryd migrate [flags]\n\nCreates the database if missing and applies River's and memoryd's migrations.")
	o.register(f)
	if err := f.Parse(args); err != nil {
		return err
	}
	logger, err := o.logger(a)
	if err != nil {
		return err
	}
	s, err := o.openStore(ctx, true, logger)
	if err != nil {
		return err
	}
	defer s.Close()
	applied, err := s.Migrate(ctx, migrations.FS, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "migrations applied: %d (schema up to date)\n", len(applied))
	return nil
}
