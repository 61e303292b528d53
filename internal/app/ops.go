package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/internal/httperrlog"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// metrics are memoryd's Prometheus metrics. Counters the components keep
// themselves are read at scrape time; the rest are fed through the
// components' Observer hooks, so only the composition root knows about Prometheus.
type metrics struct {
	reg            *prometheus.Registry
	rejected       *prometheus.CounterVec
	extracted      *prometheus.CounterVec
	extractSeconds *prometheus.HistogramVec
	enrichSeconds  prometheus.Histogram
	enrichDegraded *prometheus.CounterVec
	requestErrors  *prometheus.CounterVec
	pruneRuns      prometheus.Counter
	// The last prune's measure with a size limit (worker.SizeObserver).
	liveBytes, floorBytes, overLimit, sizedAt prometheus.Gauge
	sizedOnce                                 sync.Once
	pruneRemoved                              prometheus.Counter
	redactions                                *prometheus.CounterVec // issue 16 item 4 (redaction)
	queryEmbeds                               *prometheus.CounterVec // issue 17 (hybrid retrieval, embed.go)
}

// enrichBuckets are the buckets of enrich latencies, served (serve) and
// waited for (proxy): 0.5ms to 0.5s.
var enrichBuckets = []float64{.0005, .001, .002, .004, .008, .016, .032, .064, .128, .256, .512}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_turns_rejected_total", Help: "Turn events dead-lettered as invalid, by reason.",
		}, []string{"reason"}),
		extracted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_turns_extracted_total", Help: "Turns run through extraction, by outcome (" + strings.Join(worker.ExtractOutcomes(), ", ") + ").",
		}, []string{"outcome"}),
		extractSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memoryd_extraction_duration_seconds", Help: "Duration of extraction jobs, by outcome (as memoryd_turns_extracted_total's).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"outcome"}),
		enrichSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "memoryd_enrich_duration_seconds", Help: "Enrich latency from request arrival to reply.",
			Buckets: enrichBuckets,
		}),
		enrichDegraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_enrich_degraded_total", Help: "Enrich replies sent degraded, by reason (timeout, store_unavailable, overloaded, documents).",
		}, []string{"reason"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_request_errors_total", Help: "Requests to memoryd's NATS service answered with an error, by endpoint (enrich, search, facts_set, ...) and code (400 bad request, 404, 409, 413, 501, 507, 500).",
		}, []string{"endpoint", "code"}),
		pruneRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memoryd_prune_runs_total", Help: "Prune runs.",
		}),
		pruneRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memoryd_prune_removed_total", Help: "Context items removed by pruning.",
		}),
	}
	// Every known label at 0 from the start: an alert on the increase of a
	// series that appears with its first event misses that event.
	for _, r := range worker.RejectReasons() {
		m.rejected.WithLabelValues(r)
	}
	for _, o := range worker.ExtractOutcomes() {
		m.extracted.WithLabelValues(o)
		m.extractSeconds.WithLabelValues(o)
	}
	for _, r := range enricher.DegradedReasons() {
		m.enrichDegraded.WithLabelValues(r)
	}
	m.liveBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "memoryd_db_live_bytes",
		Help: "Live size of memoryd's tables (the figure --max-db-size bounds) after this process's last prune run with a size limit; absent before one."})
	m.floorBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "memoryd_db_floor_bytes",
		Help: "The size pruning cannot go under (facts, fact history, turn records without their text, documents, indexes), at this process's last prune run with a size limit."})
	m.overLimit = prometheus.NewGauge(prometheus.GaugeOpts{Name: "memoryd_db_over_limit",
		Help: "1 when this process's last prune run with a size limit left the size over --max-db-size, else 0."})
	// Any replica may run a prune job: the others keep the figures of
	// their own last one, so an alert needs to know which is the newest.
	m.sizedAt = prometheus.NewGauge(prometheus.GaugeOpts{Name: "memoryd_db_size_measured_timestamp_seconds",
		Help: "When this process's last prune run with a size limit measured memoryd_db_live_bytes, _floor_bytes and _over_limit (Unix time)."})
	m.reg.MustRegister(m.rejected, m.extracted, m.extractSeconds, m.enrichSeconds, m.enrichDegraded, m.requestErrors, m.pruneRuns, m.pruneRemoved,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registerRedactions()
	m.registerQueryEmbeddings()
	return m
}

// buildInfo is memoryd_build_info, 1 with the process's version, Go
// version and role as labels: which version each replica runs, during a
// rolling upgrade for one.
func buildInfo(version string, role Role) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "memoryd_build_info", Help: "1, labelled with memoryd's version, the Go version and the process's role.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version(), "role": string(role)},
	})
	g.Set(1)
	return g
}

// TurnRejected implements worker.Observer.
func (m *metrics) TurnRejected(reason string) { m.rejected.WithLabelValues(reason).Inc() }

// Extracted implements worker.Observer.
func (m *metrics) Extracted(took time.Duration, turns int, outcome string) {
	m.extracted.WithLabelValues(outcome).Add(float64(turns))
	m.extractSeconds.WithLabelValues(outcome).Observe(took.Seconds())
}

// Pruned implements worker.Observer.
func (m *metrics) Pruned(removed int64) {
	m.pruneRuns.Inc()
	m.pruneRemoved.Add(float64(removed))
}

// Sized implements worker.SizeObserver. The gauges are registered at the
// first report, after their values are set: before a prune with a size
// limit there is no figure, and a 0 would read as an empty database (a
// scrape between registering and setting saw zeros: a CI run). They are
// registered as one collector, so that a scrape sees all four or none (a
// scrape between the registrations of four saw two: a CI run). The time
// is set last, so that a newer time never stands beside older figures.
func (m *metrics) Sized(liveBytes, floorBytes int64, overLimit bool) {
	m.liveBytes.Set(float64(liveBytes))
	m.floorBytes.Set(float64(floorBytes))
	over := 0.0
	if overLimit {
		over = 1
	}
	m.overLimit.Set(over)
	m.sizedAt.SetToCurrentTime()
	m.sizedOnce.Do(func() {
		m.reg.MustRegister(sizeGauges{m.liveBytes, m.floorBytes, m.overLimit, m.sizedAt})
	})
}

// sizeGauges is the size gauges, registered as one collector.
type sizeGauges []prometheus.Collector

func (cs sizeGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs sizeGauges) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// Enriched implements enricher.Observer.
func (m *metrics) Enriched(took, _ time.Duration, degraded string) {
	m.enrichSeconds.Observe(took.Seconds())
	if degraded != "" {
		m.enrichDegraded.WithLabelValues(degraded).Inc()
	}
}

// RequestFailed implements enricher.ErrorObserver.
func (m *metrics) RequestFailed(endpoint string, code int) {
	m.requestErrors.WithLabelValues(endpoint, strconv.Itoa(code)).Inc()
}

// usageReporter is what the LLM extractor offers for metrics.
type usageReporter interface {
	Usage() map[string]extractor.UsageTotals
}

// serviceCollector reads counters the running service keeps: ingestion
// counts, LLM usage, River queue depth and unfinished replay resets (two queries per scrape, bounded).
type serviceCollector struct {
	app *App
	llm usageReporter // nil with the offline extractor
	// llmModel is the configured model: its LLM series read 0 before its
	// first request, rather than appearing with it.
	llmModel string

	received, recorded, duplicates, optedOut, optOutKept, clamped, msgIDMismatch, lockWaits, depth, resets, failed, llmRequests, llmTokens *prometheus.Desc

	// embedRefused counts the items whose text the embeddings server
	// refused, of this process's model (with --embed-base-url).
	embedRefused *prometheus.Desc

	// Spend caps (issue 16 item 8).
	tokensToday, dailyCap, overCapTurns *prometheus.Desc

	// The ingest consumer's backlog, by state (unread, unacked).
	backlog *prometheus.Desc

	// Postgres pools, by pool: shared, and enrich's own (EnrichPool).
	poolConns, poolMax, poolWaits, poolWaitSeconds, poolNewConns *prometheus.Desc
}

func newServiceCollector(a *App, llm usageReporter, llmModel string) *serviceCollector {
	return &serviceCollector{
		app:           a,
		llm:           llm,
		llmModel:      llmModel,
		received:      prometheus.NewDesc("memoryd_turns_received_total", "Turn events read from the stream, redeliveries included.", nil, nil),
		recorded:      prometheus.NewDesc("memoryd_turns_recorded_total", "New turns recorded and queued for extraction.", nil, nil),
		duplicates:    prometheus.NewDesc("memoryd_turns_duplicate_total", "Turn events whose turn was already recorded.", nil, nil),
		optedOut:      prometheus.NewDesc("memoryd_turns_opted_out_total", "Turn events with memory:false, acknowledged and not stored.", nil, nil),
		optOutKept:    prometheus.NewDesc("memoryd_turns_opt_out_kept_total", "Opted-out turn events, valid or not, that could not be erased from the stream (their text stays until forget).", nil, nil),
		clamped:       prometheus.NewDesc("memoryd_turns_clamped_total", "Turns stamped later than the stream's receipt time plus the allowed clock skew, recorded at the receipt time.", nil, nil),
		msgIDMismatch: prometheus.NewDesc("memoryd_turns_msg_id_mismatch_total", "Turns published with a Nats-Msg-Id other than <user-token>:<id> (recorded; but such a frontend's events of two users with the same id lose the later one to JetStream's duplicate window).", nil, nil),
		lockWaits:     prometheus.NewDesc("memoryd_extract_lock_waits_total", "Extraction jobs snoozed after a lock timeout or deadlock, without spending an attempt.", nil, nil),
		depth:         prometheus.NewDesc("memoryd_queue_jobs", "River jobs not yet finished, by queue and state.", []string{"queue", "state"}, nil),
		resets:        prometheus.NewDesc("memoryd_replay_resets_unfinished", "replay --reset runs that have not read the turn stream back (running, or stopped): their users have only part of their memory.", nil, nil),
		embedRefused:  prometheus.NewDesc("memoryd_embedding_refused_items", "Context items, every user's, whose text the embeddings server refused as input (longer than its model takes), by model (this process's): they have no vector, are found by their words only, and no sweep sends them again until their text or the model changes (memoryd embed --backfill --retry-refused does). Read from Postgres, the same figure from every replica.", []string{"model"}, nil),
		failed:        prometheus.NewDesc("memoryd_turns_failed", "Turns whose extraction failed for good, now, every user's: they wait for memoryd retry-failed (memoryd failed lists them). Read from Postgres, the same figure from every replica.", nil, nil),
		llmRequests:   prometheus.NewDesc("memoryd_llm_requests_total", "Chat completion requests sent to the model server, by model and outcome. ok: a 2xx whose body reads as a chat completion without an error object, whatever it holds (no choice, an empty reply, or not the JSON asked for: its tokens count, the extraction asks once more, and a job whose replies stay invalid counts in memoryd_turns_extracted_total{outcome=\"retry\"}, then \"failed\", and is logged); rate_limited: a 429; refused: another 4xx (a key refused, a model unknown, a prompt too long); error: a 5xx, a 408, a timeout, no answer, or a body that is not a chat completion. A 2xx carrying an error object counts as its code says (error without one).", []string{"model", "outcome"}, nil),
		llmTokens:     prometheus.NewDesc("memoryd_llm_tokens_total", "LLM tokens, by model and kind (prompt, completion).", []string{"model", "kind"}, nil),

		tokensToday:  prometheus.NewDesc("memoryd_llm_tokens_today", "Model tokens all users' turns spent today (UTC day), against memoryd_llm_daily_token_cap.", nil, nil),
		dailyCap:     prometheus.NewDesc("memoryd_llm_daily_token_cap", "Daily model token cap, by scope (global, per_user); 0 is none.", []string{"scope"}, nil),
		overCapTurns: prometheus.NewDesc("memoryd_llm_over_cap_turns_total", "Turns extracted offline because a daily token cap was reached (the model extracts them again the next UTC day).", nil, nil),

		backlog:         prometheus.NewDesc("memoryd_ingest_backlog_turns", "Turns of the stream's ingest consumer, by state: unread (no process was handed them yet: the ingest lag) and unacked (handed, not yet recorded). Read from NATS, the same figure from every replica.", []string{"state"}, nil),
		poolConns:       prometheus.NewDesc("memoryd_db_pool_connections", "Postgres connections of a pool (shared; enrich, enrich's own), by state (acquired, idle, constructing).", []string{"pool", "state"}, nil),
		poolMax:         prometheus.NewDesc("memoryd_db_pool_max_connections", "The most connections a pool opens.", []string{"pool"}, nil),
		poolWaits:       prometheus.NewDesc("memoryd_db_pool_acquire_waits_total", "Acquires that found no idle connection and waited for one (a pool at its cap, or opening a connection).", []string{"pool"}, nil),
		poolWaitSeconds: prometheus.NewDesc("memoryd_db_pool_acquire_wait_seconds_total", "Time acquires spent waiting for a connection.", []string{"pool"}, nil),
		poolNewConns:    prometheus.NewDesc("memoryd_db_pool_new_connections_total", "Connections a pool set out to open, counted before each attempt (an attempt that fails, Postgres down, counts too): steady once warm; a rising rate is connections lost and replaced, or Postgres unreachable.", []string{"pool"}, nil),
	}
}

func (c *serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.recorded, c.duplicates, c.optedOut, c.optOutKept, c.clamped, c.msgIDMismatch, c.lockWaits, c.depth, c.resets, c.failed, c.llmRequests, c.llmTokens, c.embedRefused,
		c.tokensToday, c.dailyCap, c.overCapTurns, c.backlog, c.poolConns, c.poolMax, c.poolWaits, c.poolWaitSeconds, c.poolNewConns} {
		ch <- d
	}
}

func (c *serviceCollector) Collect(ch chan<- prometheus.Metric) {
	c.app.mu.Lock()
	w, s, es := c.app.worker, c.app.store, c.app.enrichDB
	c.app.mu.Unlock()
	for _, p := range []struct {
		name string
		s    *store.Store
	}{{"shared", s}, {"enrich", es}} {
		if p.s != nil {
			c.collectPool(ch, p.name, p.s.Pool().Stat())
		}
	}
	if w != nil {
		st := w.Stats()
		ch <- prometheus.MustNewConstMetric(c.received, prometheus.CounterValue, float64(st.Received))
		ch <- prometheus.MustNewConstMetric(c.recorded, prometheus.CounterValue, float64(st.Recorded))
		ch <- prometheus.MustNewConstMetric(c.duplicates, prometheus.CounterValue, float64(st.Duplicates))
		ch <- prometheus.MustNewConstMetric(c.optedOut, prometheus.CounterValue, float64(st.OptedOut))
		ch <- prometheus.MustNewConstMetric(c.optOutKept, prometheus.CounterValue, float64(st.OptOutKept))
		ch <- prometheus.MustNewConstMetric(c.clamped, prometheus.CounterValue, float64(st.Clamped))
		ch <- prometheus.MustNewConstMetric(c.msgIDMismatch, prometheus.CounterValue, float64(st.MsgIDMismatch))
		ch <- prometheus.MustNewConstMetric(c.lockWaits, prometheus.CounterValue, float64(st.LockWaits))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s != nil {
		// The queues read 0 when empty: those this process works. The
		// embed queue is its model's (worker.QueueEmbedFor); the shared
		// "embed" queue of jobs from before per-model queues, and other
		// models' queues, show only while they hold jobs.
		queues := []string{worker.QueueExtract, worker.QueueMaintenance}
		if c.app.cfg.Embed.BaseURL != "" {
			queues = append(queues, worker.QueueEmbedFor(c.app.cfg.Embed.StoredModel()))
		}
		if depth, err := s.QueueDepth(ctx, queues...); err == nil {
			for k, n := range depth {
				ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(n), k[0], k[1])
			}
		}
		if marks, err := s.UnfinishedResets(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(c.resets, prometheus.GaugeValue, float64(len(marks)))
		}
		if n, err := s.CountFailedTurns(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(n))
		}
		if c.app.cfg.Embed.BaseURL != "" {
			// A read of embedding_refusals, which holds refusals alone:
			// not the items without a vector, whose count is a scan of
			// every item (memory.stats counts one user's).
			model := c.app.cfg.Embed.StoredModel()
			if n, err := s.CountRefusedEmbeddings(ctx, model); err == nil {
				ch <- prometheus.MustNewConstMetric(c.embedRefused, prometheus.GaugeValue, float64(n), model)
			}
		}
	}
	if c.llm != nil {
		usage := c.llm.Usage() // a copy
		if _, ok := usage[c.llmModel]; !ok && c.llmModel != "" {
			usage[c.llmModel] = extractor.UsageTotals{}
		}
		for model, u := range usage {
			ch <- prometheus.MustNewConstMetric(c.llmRequests, prometheus.CounterValue, float64(u.OK), model, "ok")
			ch <- prometheus.MustNewConstMetric(c.llmRequests, prometheus.CounterValue, float64(u.Errors-u.RateLimited-u.Refused), model, "error")
			ch <- prometheus.MustNewConstMetric(c.llmRequests, prometheus.CounterValue, float64(u.RateLimited), model, "rate_limited")
			ch <- prometheus.MustNewConstMetric(c.llmRequests, prometheus.CounterValue, float64(u.Refused), model, "refused")
			ch <- prometheus.MustNewConstMetric(c.llmTokens, prometheus.CounterValue, float64(u.PromptTokens), model, "prompt")
			ch <- prometheus.MustNewConstMetric(c.llmTokens, prometheus.CounterValue, float64(u.CompletionTokens), model, "completion")
		}
	}
	if w != nil {
		if sp, err := w.Spend(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(c.tokensToday, prometheus.GaugeValue, float64(sp.Tokens))
			ch <- prometheus.MustNewConstMetric(c.dailyCap, prometheus.GaugeValue, float64(sp.DailyTokens), "global")
			ch <- prometheus.MustNewConstMetric(c.dailyCap, prometheus.GaugeValue, float64(sp.DailyTokensPerUser), "per_user")
			ch <- prometheus.MustNewConstMetric(c.overCapTurns, prometheus.CounterValue, float64(sp.OverCapTurns))
		}
		// Last, on a budget of its own: a JetStream that is slow to answer
		// (a leader election) must not take the database reads' time, and
		// their figures off the scrape.
		bctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if b, err := w.Backlog(bctx); err == nil {
			ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(b.Unread), "unread")
			ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(b.Unacked), "unacked")
		}
	}
}

// collectPool sends one pool's statistics.
func (c *serviceCollector) collectPool(ch chan<- prometheus.Metric, name string, st *pgxpool.Stat) {
	ch <- prometheus.MustNewConstMetric(c.poolConns, prometheus.GaugeValue, float64(st.AcquiredConns()), name, "acquired")
	ch <- prometheus.MustNewConstMetric(c.poolConns, prometheus.GaugeValue, float64(st.IdleConns()), name, "idle")
	ch <- prometheus.MustNewConstMetric(c.poolConns, prometheus.GaugeValue, float64(st.ConstructingConns()), name, "constructing")
	ch <- prometheus.MustNewConstMetric(c.poolMax, prometheus.GaugeValue, float64(st.MaxConns()), name)
	ch <- prometheus.MustNewConstMetric(c.poolWaits, prometheus.CounterValue, float64(st.EmptyAcquireCount()), name)
	ch <- prometheus.MustNewConstMetric(c.poolWaitSeconds, prometheus.CounterValue, st.EmptyAcquireWaitTime().Seconds(), name)
	ch <- prometheus.MustNewConstMetric(c.poolNewConns, prometheus.CounterValue, float64(st.NewConnsCount()), name)
}

// opsServer serves /metrics, /healthz, /readyz and, when asked, pprof and
// River's UI.
type opsServer struct {
	srv *http.Server
	ln  net.Listener
	mux *http.ServeMux
	ui  *riverUI // nil when River's UI is off; set once by started
	// up is set when the App's Start has finished: until then /readyz
	// answers 503 without asking the App, whose Start holds its lock.
	up atomic.Bool
}

// startOps serves the operators' endpoint on ln until stop, from the
// moment the App's Start begins: /healthz answers at once (a liveness
// probe must not kill a process waiting for migrations or another
// process's migration lock), /readyz 503 until started.
func startOps(ln net.Listener, cfg OpsConfig, a *App, m *metrics, logger *slog.Logger) *opsServer {
	mux := http.NewServeMux()
	ops := &opsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: httperrlog.New(logger)}, ln: ln, mux: mux}
	metricsHandler := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if !ops.up.Load() {
			// Its collectors read the App, whose Start holds its lock.
			http.Error(w, "memoryd is starting", http.StatusServiceUnavailable)
			return
		}
		metricsHandler.ServeHTTP(w, r)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		checks := map[string]string{"start": "in progress (connecting, migrating or waiting for another process's migrations)"}
		if ops.up.Load() {
			checks = a.Health(r.Context())
		}
		code := http.StatusOK
		for _, v := range checks {
			if v != "ok" {
				code = http.StatusServiceUnavailable
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(checks)
	})
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	go func() {
		if err := ops.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "error", err)
		}
	}()
	logger.Info("http listening", "addr", ln.Addr().String(), "pprof", cfg.Pprof)
	return ops
}

// started marks the App's Start done: /readyz asks the App from now on,
// and ui, when not nil, is served under its path.
func (ops *opsServer) started(ui *riverUI) {
	if ui != nil {
		ops.ui = ui
		ops.mux.Handle(ui.cfg.Path, ui) // ServeMux is safe beside serving
	}
	ops.up.Store(true)
}

// stop shuts the server down, then River's UI's background services.
func (ops *opsServer) stop(ctx context.Context) error {
	err := ops.srv.Shutdown(ctx)
	if ops.ui != nil {
		ops.ui.stop()
	}
	return err
}

// Redactions (issue 16 item 4): spans of sensitive data replaced by markers.

func (m *metrics) registerRedactions() {
	m.redactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memoryd_redactions_total",
		Help: "Spans of sensitive data replaced by [redacted:<kind>] markers, by kind and where (turn: a turn's text at ingest, redeliveries included; memory: a fact or context pair an extractor returned).",
	}, []string{"kind", "where"})
	// Every kind at 0 from the start, in both places, as the other vectors.
	for _, k := range worker.RedactionKinds() {
		for _, where := range []string{worker.RedactedInTurn, worker.RedactedInMemory} {
			m.redactions.WithLabelValues(k, where)
		}
	}
	m.reg.MustRegister(m.redactions)
}

// Redacted implements worker.Observer.
func (m *metrics) Redacted(kind, where string) { m.redactions.WithLabelValues(kind, where).Inc() }
