package enricher_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func natsURL() string {
	if u := os.Getenv("MEMORYD_TEST_NATS_URL"); u != "" {
		return u
	}
	return nats.DefaultURL
}

func randomPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// harness is one running service on its own subject prefix.
type harness struct {
	nc     *nats.Conn
	svc    *enricher.Service
	client *events.Client
	prefix string
}

func connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", natsURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// start runs a service over st; configure may change the config.
func start(t *testing.T, st enricher.Store, configure func(*enricher.Config)) *harness {
	t.Helper()
	nc := connect(t)
	cfg := enricher.Config{
		Conn:   nc,
		Store:  st,
		Prefix: randomPrefix(),
		Logger: slog.New(slog.DiscardHandler),
		// A bound a healthy store meets on a busy machine, so that tests
		// asserting a full (not degraded) reply do not depend on speed;
		// the degraded tests set their own.
		Timeout: 10 * time.Second,
	}
	if configure != nil {
		configure(&cfg)
	}
	svc, err := enricher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &harness{nc: nc, svc: svc, client: events.NewClient(nc, cfg.Prefix), prefix: cfg.Prefix}
}

// ctxT bounds a test against a hang, from its seeding to its last
// request: TestDocsHybridAccess passed 10 s (seeding and embedding under
// the race detector) at load 15-22 on 2 cores.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// raw sends payload to subject and returns the reply.
func (h *harness) raw(t *testing.T, subject string, payload []byte) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.rawCtx(ctx, t, subject, payload)
}

// rawCtx is raw, the request bounded by ctx (a reply of megabytes:
// payload_test.go's quick).
func (h *harness) rawCtx(ctx context.Context, t *testing.T, subject string, payload []byte) *nats.Msg {
	t.Helper()
	msg, err := h.nc.RequestWithContext(ctx, subject, payload)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

// settledStats reads $SRV.STATS once micro has counted at least requests
// requests over all endpoints. micro counts a request, and its error, after
// the handler returns, which can be after the reply has reached the test.
func settledStats(t *testing.T, h *harness, requests int) micro.Stats {
	t.Helper()
	var stats micro.Stats
	eventstest.Eventually(t, "micro to count the requests", 10*time.Second, func() (bool, string) {
		stats = micro.Stats{}
		if err := json.Unmarshal(h.raw(t, "$SRV.STATS.memoryd."+h.svc.ID(), nil).Data, &stats); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range stats.Endpoints {
			n += e.NumRequests
		}
		return n >= requests, fmt.Sprintf("%d of %d requests counted", n, requests)
	})
	return stats
}

// errorCode returns the micro error code of a reply, 0 when it is no error.
func errorCode(t *testing.T, msg *nats.Msg) (int, string) {
	t.Helper()
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return 0, ""
	}
	n, err := strconv.Atoi(code)
	if err != nil {
		t.Fatalf("error code %q", code)
	}
	return n, msg.Header.Get(micro.ErrorHeader)
}

func enrich(t *testing.T, h *harness, req events.EnrichRequest) events.EnrichReply {
	t.Helper()
	r, err := h.client.Enrich(ctxT(t), req)
	if err != nil {
		t.Fatalf("enrich: %v", err)
	}
	return r
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func insertContext(t *testing.T, s *store.Store, items ...store.ContextWrite) []int64 {
	t.Helper()
	ids, err := s.InsertContext(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func upsertFacts(t *testing.T, s *store.Store, facts ...store.FactWrite) {
	t.Helper()
	if _, err := s.UpsertFacts(context.Background(), facts); err != nil {
		t.Fatal(err)
	}
}

// proxy forwards TCP connections to Postgres, so a test can make Postgres
// vanish (Close: connections cut, port refused), hang (Hang: connections
// accepted, nothing forwarded) and come back (Open).
type proxy struct {
	t        *testing.T
	addr     string
	upstream string

	mu    sync.Mutex
	ln    net.Listener
	hang  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup // accept loop and pipes
}

func newProxy(t *testing.T) *proxy {
	t.Helper()
	cc, err := pgx.ParseConfig(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, upstream: net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port))), conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Close)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() { // exits when the listener closes
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.handle(c)
		}
	}()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *proxy) handle(c net.Conn) {
	if !p.track(c) {
		c.Close()
		return
	}
	p.mu.Lock()
	hang := p.hang
	p.mu.Unlock()
	if hang {
		return // held open, silent, until Close
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil || !p.track(up) {
		c.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	p.wg.Add(2)
	go pipe(up, c) // each exits when either side closes
	go pipe(c, up)
}

// Close stops listening and cuts every connection.
func (p *proxy) Close() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Open listens again on the same address.
func (p *proxy) Open(hang bool) {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.hang = hang
	p.mu.Unlock()
	p.serve(ln)
}

// storeAt opens a store on the schema at url through addr (host:port).
func storeAt(t *testing.T, url, addr string) *store.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(n)
	cfg.ConnConfig.Fallbacks = nil
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool)
}

// storeVia is storeAt on p's address, with p's connections cut before the
// store's pool closes when the test ends (after the service's Stop): a
// connection the pool gave up on while Postgres hung is closed with a
// cancel request, whose answer pgx waits up to 15 s for; cut, it ends at
// once. Nothing the tests check comes after.
func storeVia(t *testing.T, url string, p *proxy) *store.Store {
	t.Helper()
	st := storeAt(t, url, p.addr)
	t.Cleanup(p.Close)
	return st
}

// blockingStore's Recall ignores its context and blocks until the test ends:
// a store that misbehaves as badly as possible.
type blockingStore struct {
	enricher.Store
	release chan struct{}
}

func (b blockingStore) Recall(context.Context, store.RecallQuery) ([]store.Fact, store.Candidates, error) {
	<-b.release
	return nil, store.Candidates{}, errors.New("released")
}
