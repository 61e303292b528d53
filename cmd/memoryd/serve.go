package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// version is memoryd's SemVer, reported by the micro service.
const version = "0.1.0"

// serveOptions are the settings of the long-running service: the app's
// configuration as flags, plus the few values that need translating.
type serveOptions struct {
	conn            connOptions
	app             app.Config
	maxDBSize       string
	maxDocsSize     string
	turnRetention   time.Duration
	shutdownTimeout time.Duration
	migrate         bool
}

// register defines serve's flags. Each starts at the app's default
// (app.Defaults: the components' own defaults), so -h shows it and no
// default is written twice.
func (o *serveOptions) register(f *flags) {
	def := app.Defaults()
	// The LLM's defaults whether or not a base URL is set; Burst's is the
	// one it takes under a rate limit.
	llmDef := extractor.LLMConfig{RequestsPerSecond: 1}.WithDefaults()
	w, l := &o.app.Worker, &o.app.LLM
	o.conn.register(f)
	f.Bool(&o.app.Store.CreateDatabase, "create-database", def.Store.CreateDatabase, "create the Postgres database when it does not exist")
	f.Bool(&o.migrate, "migrate", !def.NoMigrate, "apply the database migrations at start; false: leave the schema alone and refuse to run while a migration is pending (a rolling upgrade whose migrations memoryd migrate applies once)")
	f.Int(&w.Workers, "workers", def.Worker.Workers, "extraction jobs run at once by this process")
	f.Duration(&w.FetchCooldown, "fetch-cooldown", def.Worker.FetchCooldown, "shortest time between two fetches of extraction jobs: extraction runs at most --workers × job size turns per cooldown; lower it for a fast model")
	f.Int(&w.BatchSize, "batch-size", def.Worker.BatchSize, "most turn events recorded in one transaction")
	f.Int(&w.MaxAttempts, "max-attempts", def.Worker.MaxAttempts, "extraction attempts before a turn is marked failed")
	f.Int(&w.JobSize, "job-size", 0, fmt.Sprintf("turns per extraction job; 0 picks %d for the offline extractor and %d for an LLM (parallel model calls)", app.JobSizeRules, app.JobSizeLLM))
	f.Duration(&w.JobTimeout, "job-timeout", def.Worker.JobTimeout, "bound on one extraction job; a job still running after twice this in a live process is retried (the jobs of a process that died are taken over within about 10s)")
	f.Duration(&w.AckWait, "ack-wait", def.Worker.AckWait, "how long JetStream waits for an ingest ack before redelivering (to another process)")
	f.Duration(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long running jobs may take to finish on SIGINT/SIGTERM before they are handed back")
	f.Duration(&o.app.Enricher.Timeout, "enrich-timeout", def.Enricher.Timeout, "bound on an enrich reply; past it the reply is empty and marked degraded")
	f.Int(&o.app.Enricher.MaxInFlight, "enrich-max-in-flight", def.Enricher.MaxInFlight, "enrich requests worked on at once (four times as many wait for their turn within --enrich-timeout; past that the reply is degraded, \"memoryd is overloaded\")")
	f.Int(&o.app.Enricher.MaxUserEnrichInFlight, "enrich-max-user-in-flight", 0, "enrich requests of one user worked on at once, so that one user's flood leaves the others served (four times as many of the user wait; 0: a quarter of --enrich-max-in-flight and at most half of --enrich-max-conns, so that one user's enrich requests leave the other half of the connections to the others; raise it for many people behind one user id)")
	f.Int(&o.app.EnrichPool.MaxConns, "enrich-max-conns", def.EnrichPool.MaxConns, "Postgres connections enrich reads from: a pool of its own, which ingest and extraction cannot take (at most the --database-url's pool_max_conns when it sets one)")
	f.Int(&o.app.EnrichPool.MinConns, "enrich-min-conns", def.EnrichPool.MinConns, "enrich connections opened, with enrich's statements prepared on each, before the service answers")
	f.Duration(&o.app.BackPressure.Latency, "backpressure-latency", def.BackPressure.Latency, "enrich reply time (the slowest tenth over the last second) above which ingest and extraction are held back, the longest pauses at twice it; negative: never held back")
	f.Duration(&o.app.BackPressure.GiveWay, "backpressure-giveway", def.BackPressure.GiveWay, "longest wait of a statement of ingest, extraction and the other background work before it is sent while enrich is working on a request (statements already running and commits are not held); negative: never waits")
	f.Duration(&w.MaxPause, "max-pause", def.Worker.MaxPause, "longest wait of one ingest batch or extraction job for its turn while enrich is slow (fewer run at once the slower enrich is, one at a time at the slowest; after this wait it runs anyway: ingest never stalls)")
	f.Int(&w.BacklogTurns, "backlog-turns", def.Worker.BacklogTurns, "a user with this many turns waiting for extraction has their new extraction jobs run after every other user's waiting job, so a flooding frontend does not delay the others' memory (negative: every job in order of arrival)")
	f.Duration(&w.ExtractDebounce, "extract-debounce", def.Worker.ExtractDebounce, "wait this long after a turn so a burst in one conversation is extracted in one LLM call (0: every turn at once)")
	f.String(&o.maxDBSize, "max-db-size", "", "bound on the live size of memoryd's tables: over it processed turns' text (stored over an hour ago) is cleared, then the oldest context items are pruned, never more than the excess; a limit below what pruning can reach is logged as an error at start and serve runs on, pruning what it can (e.g. 500M or 10G: K, M, G and T are powers of 1024, with or without a trailing B or iB, so 10GB is 10GiB; empty: no limit)")
	f.Int(&w.MaxContextPerUser, "max-context-per-user", def.Worker.MaxContextPerUser, "keep at most this many context items per user, pruning the oldest (0: no cap)")
	f.Duration(&w.PruneInterval, "prune-interval", def.Worker.PruneInterval, "how often the size limits and the turn retention are applied")
	f.Duration(&w.CompletedJobRetention, "completed-job-retention", def.Worker.CompletedJobRetention, "how long River keeps the rows of completed jobs (about one a turn) before deleting them; negative keeps them forever")
	f.Duration(&o.turnRetention, "turn-retention", def.Worker.TurnRetention, "how long a processed turn keeps its text in Postgres (the stream keeps the event; replay restores it); 0 keeps it forever")
	f.Duration(&o.app.Changes.MaxAge, "changes-max-age", def.Changes.MaxAge, "how long a memory change waits to be published while NATS is unreachable before it is dropped (subscribers see a gap in seq); negative: never dropped")
	f.String(&o.app.Ops.Addr, "http", "", "address for /metrics, /healthz and /readyz, e.g. 127.0.0.1:9090 or :9090 (empty: off)")
	f.Bool(&o.app.Ops.Pprof, "pprof", false, "also serve Go pprof under /debug/pprof/ on --http")
	f.String(&l.BaseURL, "llm-base-url", "", "OpenAI-compatible API base URL, e.g. http://127.0.0.1:11434/v1; empty uses the offline rule-based extractor")
	f.Secret(&l.APIKey, "llm-api-key", "API key for the LLM server")
	f.String(&l.APIKeyFile, "llm-api-key-file", "", "file holding the LLM server's API key (instead of --llm-api-key), read again when it changes: a key rotated in the file is used from the next request on, without a restart")
	f.String(&l.Model, "llm-model", "", "model name (required with --llm-base-url)")
	f.Duration(&l.Timeout, "llm-timeout", llmDef.Timeout, "timeout of one LLM request")
	f.Int(&l.MaxConcurrency, "llm-concurrency", llmDef.MaxConcurrency, "LLM requests in flight at once (over all jobs of this process)")
	f.Float(&l.RequestsPerSecond, "llm-rps", 0, "LLM requests per second, retries included (0: unlimited); a 429 pauses all requests")
	f.Int(&l.Burst, "llm-burst", llmDef.Burst, "requests allowed at once above --llm-rps")
	f.String(&l.ResponseFormat, "llm-response-format", llmDef.ResponseFormat, "json_schema, json_object or none (for servers that reject structured output; a server refusing the format with a 400 is asked with less, and so are later requests)")
	f.Int(&l.MaxTokens, "llm-max-tokens", llmDef.MaxTokens, "most tokens the model may generate for one reply (sent as max_tokens)")
	f.Duration(&w.MaxModelOutage, "llm-max-outage", def.Worker.MaxModelOutage, "how long an extraction job waits for a model server that does not answer (no connection, or 502, 503: restarting, loading a model; or 500s, 504s or timeouts of three different requests in a row; or one refusing the API key or the model: 401, 404, 403s of three different requests in a row) without spending attempts; then attempts are spent (negative: no waiting)")
	f.String(&o.app.Embed.BaseURL, "embed-base-url", "", "OpenAI-compatible embeddings API base URL (/v1/embeddings), e.g. http://127.0.0.1:11434/v1; empty: no embeddings (lexical search only)")
	f.String(&o.app.Embed.Model, "embed-model", def.Embed.Model, "embedding model name, stored with every vector; a change re-embeds every item in the background")
	f.Int(&o.app.Embed.Dimensions, "embed-dimensions", def.Embed.Dimensions, "vector size asked of the embeddings model, sent as \"dimensions\" (OpenAI's text-embedding-3-*; 0: not sent, the model's own); stored as part of the model's name, so a change re-embeds every item in the background as a model change does")
	f.Secret(&o.app.Embed.APIKey, "embed-api-key", "API key for the embeddings server")
	f.String(&o.app.Embed.APIKeyFile, "embed-api-key-file", "", "file holding the embeddings server's API key (instead of --embed-api-key), read again when it changes")
	f.Duration(&o.app.Embed.Timeout, "embed-timeout", def.Embed.Timeout, "timeout of one request of an embed job (a batch of texts); past it the job is retried. A query's own embedding has --embed-query-timeout")
	f.Duration(&o.app.Enricher.EmbedTimeout, "embed-query-timeout", def.Enricher.EmbedTimeout, "share of --enrich-timeout an enrich or search query's embedding may take; past it, or when the endpoint fails, the reply is lexical (not degraded)")
	f.Int(&o.app.Enricher.MaxDocumentBytes, "max-document-bytes", def.Enricher.MaxDocumentBytes, "largest knowledge base document memory.docs.put accepts (a request must also fit the NATS server's max_payload)")
	f.String(&o.maxDocsSize, "max-docs-size", "", "cap on the content size of all knowledge base documents together (every collection and owner; on disk they take several times it with their chunks and indexes): a docs put that would go over it is refused, code 507 (e.g. 200M or 2G, powers of 1024 as --max-db-size; empty: no cap)")
	f.Int64(&o.app.Enricher.VectorCacheBytes, "vector-cache-bytes", def.Enricher.VectorCacheBytes, "memory for users' vectors cached by enrich and search (least recently used users evicted first)")
	f.Int64(&w.DailyTokensPerUser, "llm-daily-tokens-per-user", def.Worker.DailyTokensPerUser, "model tokens one user's turns may spend per UTC day; over it they are extracted offline, and by the model again the next day (0: no cap)")
	f.Int64(&w.DailyTokens, "llm-daily-tokens", def.Worker.DailyTokens, "model tokens all users' turns may spend per UTC day; over it turns are extracted offline, and by the model again the next day (0: no cap)")

	// River's UI on --http (issue 20 item 3).
	ui := &o.app.RiverUI
	f.Bool(&ui.Enabled, "riverui", false, "serve River's UI (jobs and queues) on --http under --riverui-path; needs --riverui-token or --riverui-user and --riverui-password")
	f.String(&ui.Path, "riverui-path", def.RiverUI.Path, "path River's UI is served under on --http")
	f.String(&ui.User, "riverui-user", "", "basic auth user for River's UI (with --riverui-password)")
	f.Secret(&ui.Password, "riverui-password", "basic auth password for River's UI")
	f.Secret(&ui.Token, "riverui-token", "bearer token for River's UI (Authorization: Bearer; a browser may open <path>?token=<token> once, kept in a cookie)")
	f.Bool(&ui.AllowMutations, "riverui-mutations", false, "let River's UI retry, cancel and delete jobs and pause, resume and change queues (otherwise only GET and HEAD are served: 403)")
	// Traces (issue 20 item 5).
	f.String(&o.app.Tracing.OTLPEndpoint, "otlp-endpoint", "", otlpEndpointUsage)
}

// otlpEndpointUsage is --otlp-endpoint's help, for serve and proxy.
const otlpEndpointUsage = "OTLP/HTTP endpoint OpenTelemetry traces are sent to, e.g. http://127.0.0.1:4318 (an OpenTelemetry collector or Jaeger; empty: tracing off)"

// keepsZero are the settings whose 0 is a value of its own, not "the
// default": a 0 given for any other setting is refused (see check).
var keepsZero = map[string]bool{"turn-retention": true}

// check refuses, before anything connects, values no component could use,
// naming the flag (exit 2). A 0 the user gave for a setting whose default
// is not 0 is a mistake, not a request for the default (which -h shows).
func (o *serveOptions) check(f *flags) error {
	if _, err := parseSize(o.maxDBSize); err != nil {
		return f.usageErr("--max-db-size: %v", err)
	}
	if _, err := parseSize(o.maxDocsSize); err != nil {
		return f.usageErr("--max-docs-size: %v", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.conn.logLevel)); err != nil {
		return f.usageErr("--log-level %q is not debug, info, warn or error", o.conn.logLevel)
	}
	if o.shutdownTimeout < 0 {
		return f.usageErr("--shutdown-timeout %s is out of range: it must be 0 or more", o.shutdownTimeout)
	}
	if o.turnRetention < 0 {
		// Taken as "forever" before, silently: 0 says that.
		return f.usageErr("--turn-retention %s is out of range: it must be 0 (forever) or more", o.turnRetention)
	}
	if a := o.app.Ops.Addr; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return f.usageErr("--http %q is not an address such as 127.0.0.1:9090 or :9090", a)
		}
	}
	var bad error
	f.VisitAll(func(fl *flag.Flag) {
		v := fl.Value.String()
		if bad == nil && f.source[fl.Name] != "default" && !keepsZero[fl.Name] && (v == "0" || v == "0s") && v != fl.DefValue {
			bad = f.usageErr("--%s %s is out of range: it must be more than 0 (leave it out for the default, %s)", fl.Name, v, fl.DefValue)
		}
	})
	return bad
}

// config maps the flags to the app's configuration.
func (o *serveOptions) config(logger *slog.Logger, name string) app.Config {
	c := o.app
	conn := o.conn.config(name, logger)
	c.Logger, c.Prefix, c.Stream, c.NATS, c.Version = conn.Logger, conn.Prefix, conn.Stream, conn.NATS, version
	c.Store.URL = conn.Store.URL
	c.NoMigrate = !o.migrate
	c.Worker.MaxDBSize, _ = parseSize(o.maxDBSize)       // checked by check
	c.Enricher.MaxDocsSize, _ = parseSize(o.maxDocsSize) // checked by check
	c.Worker.TurnRetention = o.turnRetention
	if o.turnRetention == 0 {
		c.Worker.TurnRetention = -1 // the worker's "forever"
	}
	return c
}

// newApp checks the flags and assembles the app; a configuration the app
// refuses is a usage error naming the flag.
func (o *serveOptions) newApp(f *flags, a *cli, name string) (*app.App, *slog.Logger, error) {
	if err := o.check(f); err != nil {
		return nil, nil, err
	}
	logger, err := o.conn.logger(a)
	if err != nil {
		return nil, nil, err
	}
	svc, err := app.New(o.config(logger, name))
	var cerr *app.ConfigError
	if errors.As(err, &cerr) {
		return nil, nil, f.usageErr("%s", configErrorFlags(cerr))
	}
	if err == nil {
		o.warnUnusedModelFlags(f, logger)
	}
	if err == nil && name == "memoryd" && o.app.Role != app.RoleIngest { // serve and config print
		// The URL's pool_max_conns caps enrich's pool: said when it lowers
		// a size the operator set (the default's is lowered silently).
		ep := svc.Config().EnrichPool
		for _, s := range []struct {
			flag      string
			set, used int
		}{{"enrich-max-conns", o.app.EnrichPool.MaxConns, ep.MaxConns}, {"enrich-min-conns", o.app.EnrichPool.MinConns, ep.MinConns}} {
			if f.source[s.flag] != "default" && s.used < s.set {
				logger.Warn(fmt.Sprintf("--%s %d is lowered to %d, the pool_max_conns of --database-url", s.flag, s.set, s.used), "source", f.source[s.flag])
			}
		}
	}
	return svc, logger, err
}

// warnUnusedModelFlags warns of the LLM's or the embeddings server's
// settings given without its base URL, which turns it off: a walk that set
// --llm-api-key-file and not --llm-base-url got the offline rules without a
// word about the key.
func (o *serveOptions) warnUnusedModelFlags(f *flags, logger *slog.Logger) {
	for _, g := range []struct {
		base, off string
		set       bool
		flags     []string
	}{
		{"--llm-base-url", "the offline rules extract", o.app.LLM.BaseURL != "", []string{"llm-model", "llm-api-key", "llm-api-key-file"}},
		{"--embed-base-url", "retrieval is by keywords only", o.app.Embed.BaseURL != "", []string{"embed-model", "embed-dimensions", "embed-api-key", "embed-api-key-file"}},
	} {
		if g.set {
			continue
		}
		for _, fl := range g.flags {
			// A value equal to the default (an empty key, a file written
			// by config print) gives nothing to leave unused.
			if v := f.Lookup(fl); v != nil && v.Value.String() == v.DefValue {
				continue
			}
			if src := f.source[fl]; src != "" && src != "default" {
				logger.Warn(fmt.Sprintf("--%s is set without %s, so it is not used (%s)", fl, g.base, g.off), "source", src)
			}
		}
	}
}

// startErr names the flag behind a failure to start.
func startErr(err error) error {
	var (
		floor *worker.SizeFloorError
		ops   *app.OpsListenError
	)
	switch {
	case errors.As(err, &floor):
		return errors.New(floor.Describe("--max-db-size"))
	case errors.As(err, &ops):
		return fmt.Errorf("--http %s: %w", ops.Addr, ops.Err)
	}
	return err
}

func runServe(ctx context.Context, a *cli, args []string) error {
	var (
		o    serveOptions
		role string
	)
	f := newFlags("serve", `Usage: memoryd serve [--role all|enrich|ingest] [flags]

Runs the ingest consumer, the River extraction workers and the enrich service
until SIGINT/SIGTERM; with --role, one side only, so that enrich and
extraction can run in separate processes and on separate machines.`)
	o.register(f)
	registerRole(f, &role)
	if err := f.Parse(args); err != nil {
		return err
	}
	r, err := parseRole(f, role)
	if err != nil {
		return err
	}
	o.app.Role = r
	svc, logger, err := o.newApp(f, a, "memoryd")
	if err != nil {
		return err
	}
	routeOTelErrors(logger, o.app.Tracing.OTLPEndpoint)
	if err := svc.Start(ctx); err != nil {
		if ctx.Err() != nil {
			// SIGINT/SIGTERM while starting: what failed is the start the
			// signal ended (a connect reads as "Postgres is not
			// reachable"), not a fault; Start stopped what it had started.
			logger.Info("stopped before it was ready")
			return nil
		}
		return startErr(err)
	}
	<-ctx.Done()
	logger.Info("shutting down", "timeout", o.shutdownTimeout)
	stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := svc.Stop(stopCtx); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// registerRole registers serve's --role, which config print shows too.
func registerRole(f *flags, role *string) {
	f.String(role, "role", string(app.RoleAll), "what this process runs: all (ingest, extraction and the memory.* requests), enrich (answers the memory.* requests only: run processes of role all or ingest beside it for the turn stream and the jobs its requests enqueue) or ingest (the turn stream and the River jobs only: answers no memory.* request)")
}

func parseRole(f *flags, role string) (app.Role, error) {
	switch r := app.Role(role); r {
	case app.RoleAll, app.RoleEnrich, app.RoleIngest:
		return r, nil
	}
	return "", f.usageErr("--role %q is not all, enrich or ingest", role)
}

func runMigrate(ctx context.Context, a *cli, args []string) (err error) {
	defer func() {
		err = ifUnconfirmed(err, migrateHint)
	}()
	var (
		o                 connOptions
		setPrefix, status bool
	)
	f := newFlags("migrate", `Usage: memoryd migrate [--status] [flags]

Creates the database if missing (not beside a turn stream whose ingest
consumer has delivered events: see serve's --create-database) and applies
River's and memoryd's migrations.
--status lists the migrations pending (and those a newer memoryd applied)
and applies nothing: exit 0 whether any is pending or not, 1 when the
database does not exist.
A database holds one prefix's memory: the first serve or replay records its
--prefix, and memoryd of another prefix refuses it. --set-prefix records
--prefix (and --stream) instead, to move a deployment to another prefix with
every memoryd using the database stopped, and says what the stream recorded
before keeps (its turns, read by no memoryd of the new prefix).`)
	o.register(f)
	f.ArgBool(&setPrefix, "set-prefix", false, "record --prefix and --stream as what this database serves, replacing what is recorded")
	f.ArgBool(&status, "status", false, "list the migrations pending and apply nothing")
	if err := f.Parse(args); err != nil {
		return err
	}
	if status && setPrefix {
		return f.usageErr("--status applies nothing and --set-prefix writes: give one")
	}
	logger, err := o.logger(a)
	if err != nil {
		return err
	}
	cfg := o.config("memoryd-migrate", logger)
	cfg.Store.CreateDatabase = true
	m, err := app.New(cfg)
	if err != nil {
		return err
	}
	defer m.Stop(context.WithoutCancel(ctx))
	if status {
		return migrateStatus(ctx, a, m)
	}
	// As serve --create-database: a missing database beside a stream
	// already consumed is another deployment's typo, not created.
	if err := m.RefuseNewDatabase(ctx); err != nil {
		return err
	}
	applied, err := m.Migrate(ctx)
	if err != nil {
		return err
	}
	ahead, err := m.NewerMigrations(ctx)
	if err != nil {
		return err
	}
	if len(ahead) > 0 {
		// Not "up to date": this memoryd is older than the schema.
		fmt.Fprintf(a.stdout, "migrations applied: %d; the database also has migrations %v, which a newer memoryd applied and this one does not know: run that version\n", len(applied), ahead)
	} else {
		fmt.Fprintf(a.stdout, "migrations applied: %d (schema up to date)\n", len(applied))
	}
	if setPrefix {
		prev, had, err := m.SetDeployment(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "this database now serves prefix %q (stream %s)\n", o.prefix, o.stream)
		if had && (prev.Prefix != o.prefix || prev.Stream != o.stream) {
			printLeftByMove(a, prev, o.prefix, o.stream)
		}
	}
	return nil
}

// migrateStatus prints what migrate would apply, and the migrations a newer
// memoryd applied.
func migrateStatus(ctx context.Context, a *cli, m *app.App) error {
	pending, err := m.PendingMigrations(ctx)
	if err != nil {
		return err
	}
	ahead, err := m.NewerMigrations(ctx)
	if err != nil {
		return err
	}
	if pending.Empty() {
		fmt.Fprintln(a.stdout, "pending migrations: none")
	}
	for _, r := range pending.River {
		fmt.Fprintf(a.stdout, "pending (River): %s\n", r)
	}
	for _, name := range pending.Memoryd {
		fmt.Fprintf(a.stdout, "pending: %s\n", name)
	}
	if len(ahead) > 0 {
		fmt.Fprintf(a.stdout, "the database also has migrations %v, which a newer memoryd applied and this one does not know\n", ahead)
	}
	return nil
}

// printLeftByMove says what a move to another prefix or stream leaves with
// the stream recorded before, which no memoryd of the new one reads (an
// ops walk found each of these only later, by its effects).
func printLeftByMove(a *cli, prev store.Deployment, prefix, stream string) {
	if prev.Stream == stream {
		fmt.Fprintf(a.stdout, "stream %s's ingest consumer (memoryd-ingest), if it has one, reads prefix %q's subjects, and serve of prefix %q refuses it until it is deleted; "+
			"the events already in the stream stay under %q's subjects, which no replay of prefix %q reads: give a new --stream instead (see docs/operations.md, Scale-out)\n",
			stream, prev.Prefix, prefix, prev.Prefix, prefix)
		return
	}
	fmt.Fprintf(a.stdout, "the turns of stream %s (prefix %q) stay there, read by no memoryd of prefix %q: no replay of stream %s rebuilds the memory extracted from them "+
		"(a replay --reset refuses to delete it), a forget does not delete a user's events there, and %s_DEADLETTER and %s_FORGETS are not read; "+
		"keep the stream or delete it as docs/operations.md, Scale-out, says\n",
		prev.Stream, prev.Prefix, prefix, stream, prev.Stream, prev.Stream)
}
