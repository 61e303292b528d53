package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/app"
	"github.com/memoryd/memoryd/store"
)

// latencies is a sample of durations.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// request is one enrich request of the workload.
type request struct {
	user    int
	message string
}

// workload returns n requests for random users, deterministic per seed.
func workload(o *options, n int, seed uint64) []request {
	r := rand.New(rand.NewPCG(seed, 99))
	w := newWords(seed)
	out := make([]request, n)
	for i := range out {
		u := r.IntN(o.users)
		out[i] = request{user: u, message: message(r, w, u, o.items/o.users)}
	}
	return out
}

// enrichPhase seeds (or reuses) a schema with corpus c, then measures
// enrich, its floor, enrich through a serve process (cold start, 8
// clients, under ingest), and the table size.
func (b *bench) enrichPhase(ctx context.Context, c corpus) error {
	o, e := b.o, b.env
	r := &corpusResults{name: c.name(), describe: c.describe()}
	b.results.corpora = append(b.results.corpora, r)
	r.lengths = corpusLengths(c)
	logf("corpus %s: %d users, %d items; %s", c.name(), c.users(), r.lengths.items, r.lengths)
	schema := o.schema
	var url string
	if schema == "" {
		schema = "bench_" + b.id + "_" + c.name()
		var err error
		if url, err = e.newSchema(ctx, schema); err != nil {
			return err
		}
		logf("seeding %d context items and %d facts a user over %d users into schema %s", r.lengths.items, c.facts(), c.users(), schema)
		if err := seed(ctx, url, c); err != nil {
			return err
		}
	} else {
		url = e.schemaURL(schema)
		logf("reusing seeded schema %s", schema)
	}
	if o.keep {
		e.keep = schema
	}

	// Table size and row counts.
	var rowsN, total, heap, terms int64
	if err := e.admin.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s.context), pg_total_relation_size('%[1]s.context'), pg_relation_size('%[1]s.context'),
		coalesce(pg_total_relation_size(to_regclass('%[1]s.context_terms')), 0)`,
		pgx.Identifier{schema}.Sanitize())).Scan(&rowsN, &total, &heap, &terms); err != nil {
		return err
	}
	var factsN, usersN int64
	if err := e.admin.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s.facts), (SELECT count(DISTINCT user_id) FROM %[1]s.context)`,
		pgx.Identifier{schema}.Sanitize())).Scan(&factsN, &usersN); err != nil {
		return err
	}
	r.contextRows, r.factRows, r.seedUsers = rowsN, factsN, usersN
	if rowsN > 0 {
		r.bytesPer1k = float64(total) / float64(rowsN) * 1000
		r.heapPer1k = float64(heap) / float64(rowsN) * 1000
		r.termsPer1k = float64(terms) / float64(rowsN) * 1000
	}

	prefix := "bench_" + b.id + "_" + c.name()

	// The service side: memoryd's enrich service as the app assembles it,
	// alone (no ingest or extraction), on a NATS connection of its own,
	// labelled for the CPU profile; an echo responder on the same
	// connection for the floor.
	var (
		srvNC *nats.Conn
		svc   *app.App
		serr  error
	)
	pprof.Do(ctx, pprof.Labels("side", "server"), func(ctx context.Context) {
		if srvNC, serr = nats.Connect(o.natsURL, nats.Name("membench-service")); serr != nil {
			return
		}
		if _, serr = srvNC.Subscribe(prefix+".echo.*", func(m *nats.Msg) { _ = m.Respond(m.Data) }); serr != nil {
			return
		}
		if svc, serr = app.New(app.Config{Conn: srvNC, Store: store.Config{URL: url}, Prefix: prefix, Logger: quietLogger()}); serr != nil {
			return
		}
		serr = svc.StartEnrich(ctx)
	})
	if srvNC != nil {
		defer srvNC.Close()
	}
	if serr != nil {
		return serr
	}
	defer svc.Stop(context.Background())
	var err error
	if err := srvNC.Flush(); err != nil {
		return err
	}

	clients := make([]*nats.Conn, o.clients)
	for i := range clients {
		if clients[i], err = nats.Connect(o.natsURL, nats.Name("membench-client")); err != nil {
			return err
		}
		defer clients[i].Close()
	}

	// Warm up (connections, plans, caches) with requests not measured.
	logf("enrich: warm-up")
	warm := c.workload(300, 1)
	if _, err := enrichSerial(ctx, clients[0], prefix, warm, &r.enrich1); err != nil {
		return err
	}
	r.enrich1 = enrichStats{}

	// 1 client, interleaved with its floor: for each request the bare
	// query, the NATS echo and the enrich request, in rotating order, so
	// that all three see the same cache state.
	logf("enrich: %d requests, 1 client, interleaved with the floor (echo, query)", o.singleRequests)
	reqs := c.workload(o.singleRequests, 2)
	if err := serialWithFloor(ctx, clients[0], prefix, url, reqs, r); err != nil {
		return err
	}

	// 8 clients, closed loop, with the CPU split and an optional profile.
	logf("enrich: %d clients for %s", o.clients, o.loadDuration)
	var prof *os.File
	if o.cpuProfile != "" {
		path := o.cpuProfile
		if len(b.o.corpora()) > 1 {
			path += "." + c.name()
		}
		if prof, err = os.Create(path); err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
		defer logf("wrote CPU profile %s (go tool pprof -top -tagfocus=side=server %s)", path, path)
	}
	cpu0 := sampleCPU()
	r.enrich8, err = enrichLoad(ctx, clients, prefix, c, o.loadDuration, 3)
	cpu1 := sampleCPU()
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	if err != nil {
		return err
	}
	r.cpu8 = cpuSplit(cpu0, cpu1)

	// Its floor with the same clients: each a closed loop of the NATS echo
	// then the query alone.
	logf("floor: %d clients of echo + query for %s", o.clients, o.loadDuration)
	if r.floor8, err = floorLoad(ctx, clients, prefix, url, c, o.loadDuration); err != nil {
		return err
	}

	if o.embed == "fake" {
		if err := b.hybridPhase(ctx, url, prefix, clients, c, r); err != nil {
			return err
		}
	}

	// The same load through a real `memoryd serve` process on this schema:
	// cold start, resident memory, and enrich while serve ingests.
	return b.serveEnrich(ctx, url, clients, c, r)
}

type enrichStats struct {
	lat        latencies
	took       latencies // the service's own time, from the replies' took_ms
	sizes      bool      // sum the replies' JSON size into replyBytes (costs CPU: not under load)
	replyBytes int
	n          int
	hits       int // replies with at least one context item
	degraded   int
	facts      int
	elapsed    time.Duration
	perSecond  float64
}

func enrichOne(ctx context.Context, c *events.Client, rq request, st *enrichStats) (time.Duration, error) {
	t0 := time.Now()
	reply, err := c.Enrich(ctx, events.EnrichRequest{UserID: userID(rq.user), Message: rq.message})
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	st.n++
	if len(reply.Context) > 0 {
		st.hits++
	}
	if reply.Degraded {
		st.degraded++
	}
	st.facts += len(reply.Facts)
	st.took = append(st.took, time.Duration(reply.TookMS*float64(time.Millisecond)))
	if st.sizes {
		data, _ := json.Marshal(reply) // as the service encodes it
		st.replyBytes += len(data)
	}
	return d, nil
}

func enrichSerial(ctx context.Context, nc *nats.Conn, prefix string, reqs []request, st *enrichStats) (latencies, error) {
	c := events.NewClient(nc, prefix)
	lat := make(latencies, 0, len(reqs))
	t0 := time.Now()
	for _, rq := range reqs {
		d, err := enrichOne(ctx, c, rq, st)
		if err != nil {
			return nil, err
		}
		lat = append(lat, d)
	}
	st.elapsed = time.Since(t0)
	st.perSecond = float64(len(reqs)) / st.elapsed.Seconds()
	return lat, nil
}

// enrichLoad runs one closed-loop client per connection for d.
func enrichLoad(ctx context.Context, conns []*nats.Conn, prefix string, c corpus, d time.Duration, seed uint64) (enrichStats, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total enrichStats
		first error
		stop  atomic.Bool
	)
	start := time.Now()
	time.AfterFunc(d, func() { stop.Store(true) })
	for i, nc := range conns {
		wg.Add(1)
		go pprof.Do(ctx, pprof.Labels("side", "client"), func(ctx context.Context) {
			defer wg.Done()
			cl := events.NewClient(nc, prefix)
			reqs := c.workload(2000, seed*100+uint64(i))
			var st enrichStats
			var lat latencies
			for j := 0; !stop.Load() && ctx.Err() == nil; j++ {
				dd, err := enrichOne(ctx, cl, reqs[j%len(reqs)], &st)
				if err != nil {
					mu.Lock()
					first = cmp(first, err)
					mu.Unlock()
					return
				}
				lat = append(lat, dd)
			}
			mu.Lock()
			total.lat = append(total.lat, lat...)
			total.n += st.n
			total.hits += st.hits
			total.degraded += st.degraded
			total.facts += st.facts
			mu.Unlock()
		})
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	total.perSecond = float64(total.n) / total.elapsed.Seconds()
	return total, first
}

func cmp(have, next error) error {
	if have != nil {
		return have
	}
	return next
}

// serialWithFloor measures, one request at a time, enrich, the NATS echo
// (same payload, a responder doing no work) and the full-text query enrich
// needs, alone, directly through pgx: store.Recall, the one statement enrich
// runs (facts, collection statistics and candidates) and its ranking, with
// enrich's keywords, default threshold, limit and facts cap.
func serialWithFloor(ctx context.Context, nc *nats.Conn, prefix, url string, reqs []request, r *corpusResults) error {
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer s.Close()
	c := events.NewClient(nc, prefix)
	var rowsSeen, candsSeen int
	var enrichTime time.Duration
	for i, rq := range reqs {
		data, err := json.Marshal(events.EnrichRequest{UserID: userID(rq.user), Message: rq.message})
		if err != nil {
			return err
		}
		for k := range 3 {
			switch (i + k) % 3 {
			case 0:
				r.enrich1.sizes = true
				d, err := enrichOne(ctx, c, rq, &r.enrich1)
				if err != nil {
					return err
				}
				r.enrich1.lat = append(r.enrich1.lat, d)
				enrichTime += d
			case 1:
				t0 := time.Now()
				if _, err := nc.RequestWithContext(ctx, prefix+".echo."+userID(rq.user), data); err != nil {
					return err
				}
				r.echo = append(r.echo, time.Since(t0))
			case 2:
				q := store.RecallQuery{
					SearchQuery: store.SearchQuery{UserID: userID(rq.user), Keywords: enricher.Keywords(rq.message)},
					MaxFacts:    enricher.DefaultMaxFacts,
					FirstFacts:  enricher.CoreFactKeys,
				}
				t0 := time.Now()
				_, cands, err := s.Recall(ctx, q)
				if err != nil {
					return err
				}
				// The texts of the items kept, as enrich reads them after
				// ranking (store.ContextTexts): part of the query enrich needs.
				items := enricher.Rank(cands, time.Time{}, events.DefaultThreshold, events.DefaultMaxResults)
				if !cands.Texts {
					if items, err = s.ContextTexts(ctx, q.UserID, items); err != nil {
						return err
					}
				}
				r.query = append(r.query, time.Since(t0))
				rowsSeen += len(items)
				candsSeen += len(cands.Matches)
			}
		}
	}
	r.enrich1.elapsed = enrichTime
	r.enrich1.perSecond = float64(len(reqs)) / enrichTime.Seconds()
	r.queryRows = float64(rowsSeen) / float64(len(reqs))
	r.queryCands = float64(candsSeen) / float64(len(reqs))
	return nil
}

// serveEnrich starts `memoryd serve` on the seeded schema and measures,
// through it: the first requests after start (cold start), the 8-client
// load (and the process's resident memory), and enrich while serve ingests
// turns at full rate and at a fixed rate.
func (b *bench) serveEnrich(ctx context.Context, url string, clients []*nats.Conn, c corpus, r *corpusResults) error {
	o, e := b.o, b.env
	// The seeding run's names on a reused schema (--schema): its database
	// holds the memory of that prefix and stream, and serve refuses others.
	id := b.id
	if seeded, ok := strings.CutPrefix(b.o.schema, "bench_"); ok {
		if run, corpus, ok := strings.Cut(seeded, "_"); ok && corpus == c.name() {
			id = run
		}
	}
	prefix := "bench_" + id + "_serve_" + c.name()
	stream := "BENCH_" + strings.ToUpper(id) + "_SERVE_" + strings.ToUpper(c.name())
	e.addStream(stream)
	if _, err := events.EnsureStream(ctx, e.js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		return err
	}
	p, err := startServe(ctx, e, url, prefix, stream)
	if err != nil {
		return err
	}
	defer p.stop()
	logf("cold start: the first %d enrich requests after memoryd serve (pid %d) starts", coldRequests, p.cmd.Process.Pid)
	if r.cold, err = coldStart(ctx, clients[0], prefix, c.workload(coldRequests, 6)); err != nil {
		return fmt.Errorf("%w\n%s", err, p.logTail())
	}
	logf("enrich via memoryd serve: %d clients for %s", o.clients, o.serveDuration)
	warm := c.workload(200, 5)
	var ws enrichStats
	if _, err := enrichSerial(ctx, clients[0], prefix, warm, &ws); err != nil {
		return err
	}
	st, err := enrichLoad(ctx, clients, prefix, c, o.serveDuration, 4)
	if err != nil {
		return err
	}
	r.serveEnrich = st
	r.serveEnrichRSS = p.rss()

	if o.skipUnderIngest {
		return nil
	}
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer s.Close()
	for i, rate := range []float64{0, o.ingestRate} {
		label := fmt.Sprintf("load%d", i)
		turns := o.underIngestTurns
		if rate > 0 {
			turns = int(rate * o.underIngestDuration.Seconds())
		}
		what := "full rate"
		if rate > 0 {
			what = fmt.Sprintf("%.0f turns/s", rate)
		}
		logf("enrich under ingest: %d turns at %s, 1 enrich client", turns, what)
		l, err := enrichUnderIngest(ctx, e, s, clients[0], prefix, c, label, rate, turns)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, p.logTail())
		}
		r.underIngest = append(r.underIngest, l)
		logf("  enrich p50 %s p99 %s max %s (in the service p50 %s p99 %s), %d of %d degraded; ingest %.0f turns/s", ms(l.enrich.lat.pct(.5)), ms(l.enrich.lat.pct(.99)), ms(l.enrich.lat.pct(1)),
			ms(l.enrich.took.pct(.5)), ms(l.enrich.took.pct(.99)), l.enrich.degraded, l.enrich.n, l.ingestRate)
	}
	r.serveEnrichRSS = p.rss()
	return nil
}

// coldRequests is how many requests after start the cold start measures.
const coldRequests = 100

// coldStart sends reqs one at a time to a service that is starting: the
// requests no one answers yet (no responders) are not counted; from the
// first answered one, every reply is measured.
func coldStart(ctx context.Context, nc *nats.Conn, prefix string, reqs []request) (enrichStats, error) {
	cl := events.NewClient(nc, prefix)
	var st enrichStats
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < len(reqs); {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := enrichOne(rctx, cl, reqs[i], &st)
		cancel()
		if err != nil {
			if st.n > 0 || time.Now().After(deadline) || ctx.Err() != nil {
				return st, fmt.Errorf("cold start request %d: %w", i, err)
			}
			time.Sleep(20 * time.Millisecond) // not up yet
			continue
		}
		st.lat = append(st.lat, d)
		i++
	}
	return st, nil
}

// waitService waits until the enrich service answers on prefix.
func waitService(ctx context.Context, nc *nats.Conn, prefix string) error {
	c := events.NewClient(nc, prefix)
	deadline := time.Now().Add(60 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Enrich(rctx, events.EnrichRequest{UserID: "warmup", Message: "hello"})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("memoryd serve did not answer enrich on %s: %w", prefix, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serveProc is a running `memoryd serve`.
type serveProc struct {
	cmd  *exec.Cmd
	log  *os.File
	hwm  int64 // kB, updated by rss
	done chan struct{}
}

func startServe(ctx context.Context, e *env, url, prefix, stream string, extra ...string) (*serveProc, error) {
	bin, err := e.memoryd(ctx)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.tmp, prefix+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "--database-url", url, "--nats-url", e.o.natsURL, "--prefix", prefix, "--stream", stream,
		"--log-format", "json", "--log-level", "warn"}, extra...)
	args = append(args, strings.Fields(e.o.serveFlags)...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &serveProc{cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// rss returns the peak resident set (VmHWM) so far, in MiB.
func (p *serveProc) rss() float64 {
	if st := procStatus(p.cmd.Process.Pid); st != nil {
		p.hwm = max(p.hwm, st["VmHWM"])
	}
	return float64(p.hwm) / 1024
}

func (p *serveProc) stop() {
	p.rss()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.hwm = max(p.hwm, ru.Maxrss)
	}
	p.log.Close()
}

func (p *serveProc) logTail() string {
	data, _ := os.ReadFile(p.log.Name())
	if len(data) > 3000 {
		data = data[len(data)-3000:]
	}
	return "memoryd serve log tail:\n" + string(data)
}

// CPU accounting over an interval: machine busy time from /proc/stat, this
// process's own CPU (clients and in-process enrich service), and the CPU of
// the postgres and nats-server processes from /proc/<pid>/stat, so that the
// table shows where each request's CPU goes.
type cpuSample struct {
	busy, total    float64         // machine, clock ticks
	postgres, nats map[int]float64 // those processes' utime+stime by pid, clock ticks
	self           time.Duration
}

func sampleCPU() cpuSample {
	var s cpuSample
	if data, err := os.ReadFile("/proc/stat"); err == nil {
		f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			s.total += x
			if i != 3 && i != 4 { // idle, iowait
				s.busy += x
			}
		}
	}
	s.postgres, s.nats = procTicks("postgres"), procTicks("nats-server")
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return s
}

// procTicks returns the user and system CPU (clock ticks) of each running
// process whose command name is name, by pid.
func procTicks(name string) map[int]float64 {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	out := map[int]float64{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // exited meanwhile
		}
		st := string(data)
		open, closing := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || closing < open || st[open+1:closing] != name {
			continue
		}
		f := strings.Fields(st[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		k, _ := strconv.ParseFloat(f[12], 64)
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out[pid] = u + k
	}
	return out
}

// ticksBetween is the CPU the processes of b used since a: a process that
// started in between counts whole, one that exited in between is lost (a
// sum over the processes alive at each end would go negative when
// backends of other clients exit).
func ticksBetween(a, b map[int]float64) float64 {
	var sum float64
	for pid, t := range b {
		sum += max(t-a[pid], 0)
	}
	return sum
}

// cpuShare is how the machine's CPU was used over an interval, in percent of
// its capacity (all cores).
type cpuShare struct {
	busyPct, selfPct, postgresPct, natsPct float64
}

func cpuSplit(a, b cpuSample) cpuShare {
	const hz = 100 // USER_HZ
	total := b.total - a.total
	if total <= 0 {
		return cpuShare{}
	}
	pct := func(ticks float64) float64 { return ticks / total * 100 }
	return cpuShare{
		busyPct:     pct(b.busy - a.busy),
		selfPct:     pct((b.self - a.self).Seconds() * hz),
		postgresPct: pct(ticksBetween(a.postgres, b.postgres)),
		natsPct:     pct(ticksBetween(a.nats, b.nats)),
	}
}
