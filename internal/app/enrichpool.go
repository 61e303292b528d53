package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// Enrich is isolated from ingest: it reads from a Postgres pool of its own
// (EnrichPoolConfig), with its statements prepared on every connection
// before the first request, and while its replies are slow, ingest and
// extraction are held back (BackPressureConfig, worker.Config.Pacer).

// EnrichPoolConfig is the Postgres pool enrich reads from.
type EnrichPoolConfig struct {
	// MaxConns caps the pool. Enrich requests beyond it wait for a
	// connection within their budget (Enricher.Timeout). Default
	// DefaultEnrichMaxConns. Set or not, it is at most the Store URL's
	// pool_max_conns when the URL has one (a cap the operator set for each
	// of memoryd's pools): the flag's default comes filled in, so a cap
	// applied to the default alone was never applied.
	MaxConns int
	// MinConns connections are opened, with enrich's statements prepared
	// on each, before the service answers, and kept open and idle. Default
	// DefaultEnrichMinConns, at most MaxConns.
	MinConns int
}

// The enrich pool's defaults: on a 2-core Postgres a handful of connections
// already run as many statements at once as the cores can; more would queue
// inside Postgres instead of in the pool.
const (
	DefaultEnrichMaxConns = 8
	DefaultEnrichMinConns = 2
)

func (c EnrichPoolConfig) withDefaults(url string) EnrichPoolConfig {
	if c.MaxConns == 0 {
		c.MaxConns = DefaultEnrichMaxConns
	}
	if c.MaxConns > 0 && strings.Contains(url, "pool_max_conns=") {
		if pc, err := pgxpool.ParseConfig(url); err == nil && int(pc.MaxConns) < c.MaxConns {
			c.MaxConns = int(pc.MaxConns)
			// The minimum follows the cap down, as the default's does.
			c.MinConns = min(c.MinConns, c.MaxConns)
		}
	}
	if c.MinConns == 0 {
		c.MinConns = min(DefaultEnrichMinConns, c.MaxConns)
	}
	return c
}

// BackPressureConfig holds ingest and extraction back while enrich is slow:
// a frontend waits for enrich before every model call, nobody waits for a
// turn to be extracted a second sooner.
type BackPressureConfig struct {
	// Latency is the enrich reply time (less the query's embedding, which
	// ingest does not compete for) the slowest tenth of the replies of
	// the last second may reach before ingest and extraction are held
	// back: the more it is exceeded the fewer ingest batches and
	// extraction jobs run at once, one at a time at twice Latency (each
	// waits for its turn at most Worker.MaxPause, so ingest never stalls).
	// A degraded reply counts as beyond twice it. Default DefaultBackPressureLatency; negative turns
	// back-pressure off.
	Latency time.Duration
	// GiveWay is the longest a statement of the shared pool (ingest,
	// extraction, River, the change publisher, the tools' endpoints)
	// waits before it is sent while enrich is working on a request: on a
	// small machine enrich's query otherwise waits for a CPU behind
	// theirs. Statements already running are not held, nor are commits
	// and rollbacks. Unlike Latency it acts at once, on every request,
	// whatever the recent replies' times. Default DefaultGiveWay; negative:
	// never wait. Off with back-pressure.
	GiveWay time.Duration
}

// DefaultGiveWay is BackPressureConfig.GiveWay's default: about three
// times enrich's in-service p50 on real conversations, so that a statement
// waits out a request that overlaps it but an unbroken stream of enrich
// requests slows the others' statements to one per wait, never stops them.
const DefaultGiveWay = 10 * time.Millisecond

// DefaultBackPressureLatency is BackPressureConfig.Latency's default: the
// issue's enrich p99 target while ingest runs. The threshold bounds the
// slowest tenth, and under ingest enrich's p99 was 3-5 times its p90, so a
// deployment that must hold the p99 near 20 ms sets about 5 ms (enrich p99
// 26-31 ms instead of 67-80 ms on membench's realistic corpus, at 0-31 %
// less ingest); it is not the default because on a slow machine (the
// test suite under the race detector) 5 ms keeps ingest one batch at a
// time whenever enrich is busy (docs/performance.md, "Session 28").
const DefaultBackPressureLatency = 20 * time.Millisecond

func (c BackPressureConfig) withDefaults() BackPressureConfig {
	if c.Latency == 0 {
		c.Latency = DefaultBackPressureLatency
	}
	if c.GiveWay == 0 {
		c.GiveWay = DefaultGiveWay
	}
	return c
}

// enrichStore is the store the enrich service is given: enrich's reads
// (Recall and ContextTexts, and the vector cache's UserVectors) go to enrich's own pool, every other endpoint (the tools'
// reads and writes, which pass the store's context hook) to the shared
// store.
//
// Enrich's pool cancels a statement past its context on the server and
// keeps the connection (store.Config.CancelOnServer), so its reads go
// through read: a timeout's error is wrapped with ctx's, and a read that a
// cancel sent for an earlier statement of its connection reached is sent
// once more.
type enrichStore struct {
	*store.Store              // the shared pool
	recall       *store.Store // enrich's own pool
}

// Recall implements enricher.Recaller on enrich's pool.
func (e enrichStore) Recall(ctx context.Context, q store.RecallQuery) ([]store.Fact, store.Candidates, error) {
	r, err := read(ctx, func() (recalled, error) {
		f, c, err := e.recall.Recall(ctx, q)
		return recalled{f, c}, err
	})
	return r.facts, r.candidates, err
}

// ContextTexts implements enricher.Recaller on enrich's pool: the texts of
// the items a ranked enrich keeps are its second read.
func (e enrichStore) ContextTexts(ctx context.Context, userID string, items []store.ContextItem) ([]store.ContextItem, error) {
	return read(ctx, func() ([]store.ContextItem, error) { return e.recall.ContextTexts(ctx, userID, items) })
}

// StopWords implements enricher.Recaller on enrich's pool: a long
// message's keywords are capped again with it, before its Recall.
func (e enrichStore) StopWords(ctx context.Context, userID string, words []string) (map[string]bool, error) {
	return read(ctx, func() (map[string]bool, error) { return e.recall.StopWords(ctx, userID, words) })
}

// UserVectors implements enricher.VectorReader on enrich's pool: the
// vector cache's reloads are part of an enrich request.
func (e enrichStore) UserVectors(ctx context.Context, userID, model string) (store.UserVectors, error) {
	return read(ctx, func() (store.UserVectors, error) { return e.recall.UserVectors(ctx, userID, model) })
}

// SearchChunks implements enricher.ChunkSearcher on enrich's pool: every
// enrich without collections reads the user's default collections.
func (e enrichStore) SearchChunks(ctx context.Context, q store.ChunkQuery, rank store.ChunkRanker) ([]store.ChunkHit, error) {
	return read(ctx, func() ([]store.ChunkHit, error) { return e.recall.SearchChunks(ctx, q, rank) })
}

// SearchChunksHybrid and CollectionVectors keep enrich's hybrid document
// reads on enrich's pool too, out of ingest's way.
func (e enrichStore) SearchChunksHybrid(ctx context.Context, q store.ChunkQuery, pick store.ChunkPicker, rank store.HybridChunkRanker) ([]store.ChunkHit, error) {
	return read(ctx, func() ([]store.ChunkHit, error) { return e.recall.SearchChunksHybrid(ctx, q, pick, rank) })
}

func (e enrichStore) CollectionVectors(ctx context.Context, collectionID int64, model string) (store.CollectionVectors, error) {
	return read(ctx, func() (store.CollectionVectors, error) { return e.recall.CollectionVectors(ctx, collectionID, model) })
}

// Warm re-opens enrich's connections (the enricher calls it at start and
// after an outage); the shared pool warms itself.
func (e enrichStore) Warm(ctx context.Context) error { return e.recall.Warm(ctx) }

// pressureWindow is how far back pressure looks at enrich replies, and
// pressureSamples how many of the latest it keeps at most.
const (
	pressureWindow  = time.Second
	pressureSamples = 64
)

// pressure turns enrich's reply times into worker.Pacer's pressure: 0 while
// the slowest tenth of the recent replies (pressureWindow, at most
// pressureSamples of them) is within target, rising linearly to 1 at twice
// target. With no recent reply it is 0: no enrich, nothing to protect.
//
// It also lets the shared pool's statements give way to enrich's work in
// progress (GiveWay).
type pressure struct {
	target  time.Duration
	giveWay time.Duration // the longest GiveWay waits; <= 0: it never does
	now     func() time.Time

	mu   sync.Mutex
	at   [pressureSamples]time.Time
	took [pressureSamples]time.Duration
	next int

	// working is how many enrich requests are being worked on; idle is
	// closed when it falls to 0 and replaced when it rises from 0. Both
	// under wmu, apart from mu, which GiveWay's fast path does not take.
	working atomic.Int64
	wmu     sync.Mutex
	idle    chan struct{}
	// waits and waited count the statements that gave way and their time
	// (the memoryd_giveway_* metrics).
	waits, waited atomic.Int64
	// waiting, when set (by tests), is called by GiveWay once it has
	// decided to wait, before it does.
	waiting func()
}

func newPressure(target, giveWay time.Duration) *pressure {
	idle := make(chan struct{})
	close(idle)
	return &pressure{target: target, giveWay: giveWay, now: time.Now, idle: idle}
}

// EnrichWorking implements enricher.WorkObserver.
func (p *pressure) EnrichWorking(working bool) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if working {
		if p.working.Add(1) == 1 {
			p.idle = make(chan struct{})
		}
		return
	}
	if p.working.Add(-1) == 0 {
		close(p.idle)
	}
}

// GiveWay is the shared pool's store.Config.GiveWay: while enrich works on
// a request, a statement about to be sent waits until no request is being
// worked on, at most p.giveWay and never beyond ctx. With none being
// worked on it returns at once, without a lock.
func (p *pressure) GiveWay(ctx context.Context) {
	if p.giveWay <= 0 || p.working.Load() == 0 {
		return
	}
	p.wmu.Lock()
	idle := p.idle
	p.wmu.Unlock()
	if p.waiting != nil {
		p.waiting()
	}
	start := time.Now()
	t := time.NewTimer(p.giveWay)
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	p.waits.Add(1)
	p.waited.Add(int64(time.Since(start)))
}

// Enriched implements enricher.Observer. The query's embedding is left
// out: ingest does not compete with the embeddings endpoint, so holding it
// back would not make that part faster.
func (p *pressure) Enriched(took, embedding time.Duration, degraded string) {
	took -= min(embedding, took)
	if degraded != "" {
		took = max(took, 2*p.target+1) // a degraded reply is as slow as it gets
	}
	now := p.now()
	p.mu.Lock()
	p.at[p.next], p.took[p.next] = now, took
	p.next = (p.next + 1) % pressureSamples
	p.mu.Unlock()
}

// Pressure implements worker.Pacer.
func (p *pressure) Pressure() float64 {
	since := p.now().Add(-pressureWindow)
	var recent [pressureSamples]time.Duration
	n := 0
	p.mu.Lock()
	for i, at := range p.at {
		if !at.IsZero() && at.After(since) {
			recent[n] = p.took[i]
			n++
		}
	}
	p.mu.Unlock()
	if n == 0 {
		return 0
	}
	s := recent[:n]
	slices.Sort(s)
	p90 := s[(n*9+9)/10-1] // nearest rank
	return min(max(float64(p90-p.target)/float64(p.target), 0), 1)
}

// enrichObservers tells every observer of enrich replies.
type enrichObservers []enricher.Observer

func (o enrichObservers) Enriched(took, embedding time.Duration, degraded string) {
	for _, ob := range o {
		ob.Enriched(took, embedding, degraded)
	}
}

// EnrichWorking implements enricher.WorkObserver for the observers that
// do (back-pressure's give-way).
func (o enrichObservers) EnrichWorking(working bool) {
	for _, ob := range o {
		if wo, ok := ob.(enricher.WorkObserver); ok {
			wo.EnrichWorking(working)
		}
	}
}

// RequestFailed implements enricher.ErrorObserver for the observers that
// do (the metrics).
func (o enrichObservers) RequestFailed(endpoint string, code int) {
	for _, ob := range o {
		if eo, ok := ob.(enricher.ErrorObserver); ok {
			eo.RequestFailed(endpoint, code)
		}
	}
}

// QueryEmbedded implements enricher.EmbedObserver for the observers that
// do (the metrics): a list of observers must hide no interface of theirs.
func (o enrichObservers) QueryEmbedded(outcome string, took time.Duration) {
	for _, ob := range o {
		if eo, ok := ob.(enricher.EmbedObserver); ok {
			eo.QueryEmbedded(outcome, took)
		}
	}
}

// embedAnswers tells the worker of the process when the embeddings server
// answered a query enrich or search embedded: its embed jobs waiting for
// the server run then (worker.Worker.EmbeddingsAnswered), rather than
// when their snoozes end, in a process whose embed jobs all wait and so
// send the server nothing meanwhile.
type embedAnswers struct{ w *worker.Worker }

func (embedAnswers) Enriched(time.Duration, time.Duration, string) {}

// QueryEmbedded implements enricher.EmbedObserver.
func (e embedAnswers) QueryEmbedded(outcome string, _ time.Duration) {
	if outcome == enricher.EmbedOK {
		e.w.EmbeddingsAnswered()
	}
}

// registerGiveWay serves the shared pool's give-way counters: how many
// statements waited for enrich's work and how long in all.
func (m *metrics) registerGiveWay(p *pressure) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "memoryd_giveway_waits_total",
			Help: "Statements of ingest, extraction and other background work that waited for enrich's work in progress before they were sent (--backpressure-giveway).",
		}, func() float64 { return float64(p.waits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "memoryd_giveway_seconds_total",
			Help: "Time statements of ingest, extraction and other background work waited for enrich's work in progress.",
		}, func() float64 { return time.Duration(p.waited.Load()).Seconds() }),
	)
}

// recalled is a Recall's facts and candidates, as read returns them.
type recalled struct {
	facts      []store.Fact
	candidates store.Candidates
}

// read runs f, a read on enrich's pool under ctx, once more when it failed
// with query_canceled while ctx is live: pgx sends a statement's cancel
// request once its context has ended, and may reuse the connection 100 ms
// after that statement returned on its own, before a busy server has acted
// on the request, which then cancels the next statement (an A/B run at a
// load average of 14-19: 8 and 40 replies "memory store unavailable"
// within their deadline). A cancel request cancels one statement, so the
// second is not hit by it. Its error is wrapped with ctx's (ctxError).
func read[T any](ctx context.Context, f func() (T, error)) (T, error) {
	v, err := f()
	if strayCancel(ctx, err) {
		v, err = f()
	}
	return v, ctxError(ctx, err)
}

// strayCancel reports whether err is a statement's query_canceled that
// ctx did not cause.
func strayCancel(ctx context.Context, err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code == "57014" // query_canceled
}

// ctxError is err wrapped with ctx's error when ctx has ended: a statement
// cancelled on the server for it fails with the server's query_canceled,
// which says nothing of the deadline or the stop that ended it.
func ctxError(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", ctx.Err(), err)
}
