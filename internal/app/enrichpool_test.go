package app

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestEnrichPoolDefaults: enrich's pool has its documented defaults, stays
// within a cap the URL sets for memoryd's pools, and New names a bad field.
func TestEnrichPoolDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	if c.EnrichPool.MaxConns != DefaultEnrichMaxConns || c.EnrichPool.MinConns != DefaultEnrichMinConns ||
		c.BackPressure.Latency != DefaultBackPressureLatency || c.BackPressure.GiveWay != DefaultGiveWay || c.Worker.MaxPause != (worker.Config{}).WithDefaults().MaxPause {
		t.Errorf("defaults: %+v, %+v, MaxPause %s", c.EnrichPool, c.BackPressure, c.Worker.MaxPause)
	}
	c = Config{Store: store.Config{URL: store.DefaultURL + "&pool_max_conns=1"}}.withDefaults()
	if c.EnrichPool.MaxConns != 1 || c.EnrichPool.MinConns != 1 {
		t.Errorf("with pool_max_conns=1 in the URL: %+v, want 1 and 1", c.EnrichPool)
	}
	// As serve gives it: the flags' defaults filled in (Defaults). The
	// URL's cap still holds; before, the enrich pool opened 8 under
	// pool_max_conns=4.
	d := Defaults()
	d.Store.URL = store.DefaultURL + "&pool_max_conns=4"
	if c = d.withDefaults(); c.EnrichPool.MaxConns != 4 || c.EnrichPool.MinConns != DefaultEnrichMinConns {
		t.Errorf("Defaults() with pool_max_conns=4 in the URL: %+v, want 4 and %d", c.EnrichPool, DefaultEnrichMinConns)
	}
	d.Store.URL, d.EnrichPool = store.DefaultURL+"&pool_max_conns=6", EnrichPoolConfig{MaxConns: 3, MinConns: 3}
	if c = d.withDefaults(); c.EnrichPool.MaxConns != 3 || c.EnrichPool.MinConns != 3 {
		t.Errorf("--enrich-max-conns 3 under pool_max_conns=6: %+v, want 3 and 3", c.EnrichPool)
	}
	if d := Defaults(); d.EnrichPool.MaxConns != DefaultEnrichMaxConns || d.BackPressure.Latency != DefaultBackPressureLatency {
		t.Errorf("Defaults(): %+v, %+v", d.EnrichPool, d.BackPressure)
	}
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{EnrichPool: EnrichPoolConfig{MaxConns: -1}}, "app: Config.EnrichPool.MaxConns -1 is out of range"},
		{Config{EnrichPool: EnrichPoolConfig{MaxConns: 2, MinConns: 3}}, "app: Config.EnrichPool.MinConns 3 is out of range"},
		{Config{Worker: worker.Config{MaxPause: -time.Second}}, "app: Config.Worker.MaxPause -1s is out of range"},
	} {
		_, err := New(tt.cfg)
		var cerr *ConfigError
		if !errors.As(err, &cerr) || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if a, err := New(Config{BackPressure: BackPressureConfig{Latency: -1}}); err != nil || a.pressure != nil {
		t.Errorf("negative BackPressure.Latency: %v, pressure %v; want it off", err, a)
	}
}

// TestEnrichAnswersWhileIngestHoldsEveryConnection: with every connection
// of the shared pool (ingest's, extraction's) taken, enrich still answers
// from its own pool, not degraded, with the user's memory.
func TestEnrichAnswersWhileIngestHoldsEveryConnection(t *testing.T) {
	t.Parallel()
	a := startTestApp(t, nil)
	publishAndWait(t, a, "alice", events.Turn{ID: "t1", UserID: "alice", UserMessage: "I live in Lisbon and my garden has tomatoes.",
		AssistantResponse: "Tomatoes like the Lisbon sun.", Timestamp: time.Now().UTC()})
	ctx := context.Background()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pool := s.Pool()
	held := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	if st := pool.Stat(); st.AcquiredConns() != st.MaxConns() {
		t.Fatalf("holding %d of the shared pool's %d connections, want all", st.AcquiredConns(), st.MaxConns())
	}
	for range 5 {
		reply, err := events.NewClient(a.nc, a.cfg.Prefix).Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "how are my tomatoes?"})
		if err != nil {
			t.Fatal(err)
		}
		if reply.Degraded || len(reply.Context) == 0 || len(reply.Facts) == 0 {
			t.Fatalf("with the shared pool exhausted, enrich replied %+v; want its memory, not degraded", reply)
		}
	}
}

// TestPressureFollowsEnrichLatency: the pacer's pressure is 0 while the
// slowest tenth of the last second's replies is within the target, rises
// linearly to 1 at twice it, counts a degraded reply as the slowest, and
// falls back to 0 once the slow replies are older than the window.
func TestPressureFollowsEnrichLatency(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	p := newPressure(20*time.Millisecond, 0)
	p.now = func() time.Time { return now }
	if got := p.Pressure(); got != 0 {
		t.Fatalf("no replies: pressure %v, want 0", got)
	}
	for range 20 {
		p.Enriched(2*time.Millisecond, 0, "")
	}
	if got := p.Pressure(); got != 0 {
		t.Fatalf("fast replies: pressure %v, want 0", got)
	}
	// Three slow replies in 23: more than a tenth, so the slowest tenth is
	// at 30 ms, half way from the target to twice it.
	for range 3 {
		p.Enriched(30*time.Millisecond, 0, "")
	}
	if got := p.Pressure(); got < 0.49 || got > 0.51 {
		t.Fatalf("a tenth at 30 ms: pressure %v, want 0.5", got)
	}
	for range 3 {
		p.Enriched(time.Millisecond, 0, enricher.DegradedStoreUnavailable) // degraded: store unavailable, answered at once
	}
	if got := p.Pressure(); got != 1 {
		t.Fatalf("degraded replies: pressure %v, want 1", got)
	}
	now = now.Add(pressureWindow + time.Millisecond)
	if got := p.Pressure(); got != 0 {
		t.Fatalf("a window later: pressure %v, want 0", got)
	}
	p.Enriched(3*time.Millisecond, 0, "")
	if got := p.Pressure(); got != 0 {
		t.Fatalf("one fast reply after the slow ones aged out: pressure %v, want 0", got)
	}
	// A reply slow only because of its query's embedding (an endpoint
	// ingest does not compete for) puts no pressure on ingest.
	for range 10 {
		p.Enriched(90*time.Millisecond, 85*time.Millisecond, "")
	}
	if got := p.Pressure(); got != 0 {
		t.Fatalf("replies slow by their embedding only: pressure %v, want 0", got)
	}
}

// TestGiveWayWaitsForEnrichWork: while enrich works on a request, GiveWay
// waits until no request is being worked on; it waits at most its bound,
// and not beyond its context; with no enrich work it returns at once.
func TestGiveWayWaitsForEnrichWork(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Two requests overlap; the statement waits for the second to end.
	// The requests end only once GiveWay waits, so it cannot find them
	// ended before it looks.
	p := newPressure(DefaultBackPressureLatency, time.Hour)
	waiting := make(chan struct{})
	p.waiting = func() { close(waiting) }
	p.EnrichWorking(true)
	p.EnrichWorking(true)
	var ended atomic.Int32
	go func() {
		<-waiting
		ended.Add(1)
		p.EnrichWorking(false)
		ended.Add(1)
		p.EnrichWorking(false)
	}()
	p.GiveWay(ctx)
	if ctx.Err() != nil || ended.Load() != 2 {
		t.Fatalf("GiveWay returned with %d of 2 requests ended (ctx %v); want it to wait for both", ended.Load(), ctx.Err())
	}
	if p.waits.Load() != 1 {
		t.Errorf("waits counted %d, want 1", p.waits.Load())
	}
	// No enrich work: no wait, nothing counted.
	p.waiting = nil
	p.GiveWay(ctx)
	if p.waits.Load() != 1 {
		t.Errorf("GiveWay with no enrich work counted a wait")
	}

	// Work that never ends: the bound.
	b := newPressure(DefaultBackPressureLatency, time.Millisecond)
	b.EnrichWorking(true)
	b.GiveWay(ctx)
	if ctx.Err() != nil {
		t.Fatal("GiveWay did not return within its 1 ms bound")
	}
	// A statement whose context ends does not wait on.
	c := newPressure(DefaultBackPressureLatency, time.Hour)
	c.EnrichWorking(true)
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	c.GiveWay(cctx)
	if ctx.Err() != nil {
		t.Fatal("GiveWay waited past its statement's context")
	}
	// Off: never waits.
	o := newPressure(DefaultBackPressureLatency, -1)
	o.EnrichWorking(true)
	o.GiveWay(ctx)
	if o.waits.Load() != 0 {
		t.Error("GiveWay off counted a wait")
	}
}

// TestSharedPoolGivesWayToEnrich: in a running App, a statement of the
// shared pool (ingest's, extraction's) waits while enrich works on a
// request, enrich itself keeps answering from its own pool meanwhile, and
// the statement runs once the work ends.
func TestSharedPoolGivesWayToEnrich(t *testing.T) {
	t.Parallel()
	a := startTestApp(t, func(c *Config) { c.BackPressure.GiveWay = time.Hour })
	publishAndWait(t, a, "alice", events.Turn{ID: "t1", UserID: "alice", UserMessage: "I live in Lisbon and my garden has tomatoes.",
		AssistantResponse: "Tomatoes like the Lisbon sun.", Timestamp: time.Now().UTC()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}

	a.pressure.EnrichWorking(true) // a request that lasts until released below
	var released atomic.Bool
	done := make(chan error, 1)
	go func() {
		var n int
		err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM turns").Scan(&n)
		if err == nil && !released.Load() {
			err = errors.New("the shared pool's statement ran while enrich was working")
		}
		done <- err
	}()
	for range 3 {
		reply, err := events.NewClient(a.nc, a.cfg.Prefix).Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "how are my tomatoes?"})
		if err != nil {
			t.Fatal(err)
		}
		if reply.Degraded || len(reply.Context) == 0 {
			t.Fatalf("enrich while the shared pool gives way: %+v; want its memory, not degraded", reply)
		}
	}
	released.Store(true)
	a.pressure.EnrichWorking(false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a.pressure.waits.Load() == 0 {
		t.Error("no statement counted as having given way")
	}
}
