package systest

// Fault-injection tests of the reliability promises listed in
// docs/reliability.md: a worker SIGKILLed mid-ingest, Postgres cut and
// restored, NATS killed and restarted, a misbehaving LLM and a poison turn.
// Each test runs `memoryd serve` as a child process (the binary TestMain
// built) on its own Postgres schema and subject prefix,
// injects its fault on loopback, and checks that every published turn ends
// processed exactly once in effect. Each logs its figures ("figures: ...")
// for docs/reliability.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// relT0 is the base timestamp of the published turns.
var relT0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// relEnv is one test's isolated world: a schema, a prefix and stream, and a
// NATS connection (to the shared server or to the test's own).
type relEnv struct {
	t       *testing.T
	ctx     context.Context
	dbURL   string // direct to Postgres
	store   *store.Store
	natsURL string
	nc      *nats.Conn
	js      jetstream.JetStream
	prefix  string
	stream  string
	pub     *events.Publisher
}

// newRelEnv sets up a migrated schema and a turn stream on the NATS server at
// natsURL ("" for the shared test server).
func newRelEnv(t *testing.T, natsURL string) *relEnv {
	t.Helper()
	e := &relEnv{t: t, ctx: context.Background(), natsURL: natsURL}
	e.dbURL = storetest.Migrated(t) // migrated before serve starts
	e.store = storetest.Unmigrated(t, e.dbURL)
	if natsURL == "" {
		e.natsURL = eventstest.URL()
		e.nc = eventstest.Conn(t)
	} else {
		nc, err := nats.Connect(natsURL, nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		e.nc = nc
	}
	if natsURL == "" {
		e.prefix, e.stream = eventstest.Names(t, e.nc)
	} else {
		// The test's own server: its streams go with its store directory.
		id := strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
		e.prefix, e.stream = "r"+id, "R"+strings.ToUpper(id)+"_TURNS"
	}
	var err error
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(e.ctx, e.js, events.StreamConfig{Prefix: e.prefix, Stream: e.stream}); err != nil {
		t.Fatal(err)
	}
	e.pub = events.NewPublisher(e.js, e.prefix)
	return e
}

// serveArgs are the arguments of a `memoryd serve` on e, with short
// timeouts and a small Postgres pool; later flags in extra override earlier
// ones.
func (e *relEnv) serveArgs(databaseURL string, extra ...string) []string {
	args := []string{"--database-url", withPoolCap(databaseURL, servePoolConns), "--nats-url", e.natsURL, "--prefix", e.prefix, "--stream", e.stream,
		"--log-format", "json", "--workers", "4", "--batch-size", "50", "--job-timeout", "2s", "--ack-wait", "2s",
		"--shutdown-timeout", "5s"}
	return append(args, extra...)
}

// startServe runs `memoryd serve` on e with serveArgs(databaseURL, extra...).
func (e *relEnv) startServe(databaseURL string, extra ...string) *proc {
	e.t.Helper()
	return startServe(e.t, nil, e.serveArgs(databaseURL, extra...)...)
}

// relTurns returns users×perUser turns "my favorite number is i", with
// timestamps that are not in publish order, and the latest favorite_number of
// each user by timestamp (what any crash-free run stores). kind, if not nil,
// names the fault of each turn and is written into its message.
func relTurns(tag string, users, perUser int, kind func(u, i int) string) ([]events.Turn, map[string]string) {
	var turns []events.Turn
	want := map[string]string{}
	for u := range users {
		user := fmt.Sprintf("%s%02d", tag, u)
		latest := -1
		for i := range perUser {
			id := fmt.Sprintf("%s-%03d", user, i)
			k := "ok"
			if kind != nil {
				k = kind(u, i)
			}
			slot := (i*37 + u) % perUser // a permutation of 0..perUser-1 when gcd(37, perUser) = 1
			turns = append(turns, events.Turn{ID: id, UserID: user,
				UserMessage:       fmt.Sprintf("Turn %s kind=%s: my favorite number is %d", id, k, i),
				AssistantResponse: "noted " + id,
				Timestamp:         relT0.Add(time.Duration(slot) * time.Second)})
			if slot > latest {
				latest, want[user] = slot, fmt.Sprint(i)
			}
		}
	}
	return turns, want
}

// publishAll publishes turns from conc goroutines. A failed publish is
// retried (same Nats-Msg-Id, so the stream keeps one copy) up to 100 times,
// paced by a ticker; it returns how many retries were needed.
func (e *relEnv) publishAll(turns []events.Turn, conc int) (retries int64, err error) {
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make(chan error, conc)
		n    atomic.Int64
	)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pace := time.NewTicker(50 * time.Millisecond)
			defer pace.Stop()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(turns) {
					return
				}
				for attempt := 1; ; attempt++ {
					ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
					_, err := e.pub.Publish(ctx, turns[i])
					cancel()
					if err == nil {
						break
					}
					if attempt == 100 {
						errs <- fmt.Errorf("publish %s: %w (after %d attempts)", turns[i].ID, err, attempt)
						return
					}
					n.Add(1)
					<-pace.C
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return n.Load(), <-errs
}

// relFigures are what a test reports: turns published, their state in the
// turns table, context rows and duplicates.
type relFigures struct {
	Published, Recorded, Processed, Failed, Pending int64
	Context, ContextDuplicates                      int64
}

// Lost is published turns neither processed nor failed: vanished, or stuck
// pending (a failed turn is listed and can be re-run; the turns table holds
// only published ids).
func (f relFigures) Lost() int64 { return f.Published - f.Processed - f.Failed }

func (f relFigures) String() string {
	return fmt.Sprintf("published=%d recorded=%d processed=%d failed=%d pending=%d context=%d lost=%d duplicates=%d",
		f.Published, f.Recorded, f.Processed, f.Failed, f.Pending, f.Context, f.Lost(), f.ContextDuplicates)
}

func (e *relEnv) figures(published int) (relFigures, error) {
	f := relFigures{Published: int64(published)}
	err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*),
		count(*) FILTER (WHERE status = 'processed'), count(*) FILTER (WHERE status = 'failed'),
		count(*) FILTER (WHERE status = 'pending') FROM turns`).Scan(&f.Recorded, &f.Processed, &f.Failed, &f.Pending)
	if err != nil {
		return f, err
	}
	// A turn stored twice would show as two context rows with its event id
	// (or, deduplicated by content, as one row per distinct event id anyway).
	err = e.store.Pool().QueryRow(e.ctx, `SELECT count(*), count(*) - count(DISTINCT event_id) FROM context`).Scan(&f.Context, &f.ContextDuplicates)
	return f, err
}

// waitAllProcessed waits until every one of n published turns is processed.
func (e *relEnv) waitAllProcessed(n int, limit time.Duration, procs ...*proc) relFigures {
	e.t.Helper()
	var f relFigures
	waitFor(e.t, fmt.Sprintf("%d turns processed", n), limit, func() (bool, string) {
		var err error
		f, err = e.figures(n)
		if err != nil {
			return false, err.Error()
		}
		return f.Processed >= int64(n), f.String()
	}, procs...)
	return f
}

// checkExactlyOnce checks the promise: every published turn recorded and
// processed once, one context item each, none failed, and the latest fact of
// every user as a crash-free run would store it.
func (e *relEnv) checkExactlyOnce(f relFigures, want map[string]string, key string) {
	e.t.Helper()
	if f.Recorded != f.Published || f.Processed != f.Published || f.Failed != 0 || f.Context != f.Published || f.ContextDuplicates != 0 {
		e.t.Fatalf("figures %s; want every turn recorded, processed and stored once", f)
	}
	rows, err := e.store.Pool().Query(e.ctx, `SELECT user_id, value FROM facts WHERE key = $1`, key)
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var kv [2]string
		return kv, r.Scan(&kv[0], &kv[1])
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(got) != len(want) {
		e.t.Errorf("%d users have %s, want %d", len(got), key, len(want))
	}
	for _, kv := range got {
		if want[kv[0]] != kv[1] {
			e.t.Errorf("%s %s = %q, want %q (the value of the latest turn)", kv[0], key, kv[1], want[kv[0]])
		}
	}
}

// consumerBacklog is what the durable ingest consumer has not acknowledged:
// pending plus delivered-but-unacknowledged.
func (e *relEnv) consumerBacklog() (uint64, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.stream, worker.DefaultDurable)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// consumerState describes the ingest consumer and its stream, for a wait
// on the backlog that timed out: which messages are still pending.
func (e *relEnv) consumerState() string {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, e.stream, worker.DefaultDurable)
	if err != nil {
		return err.Error()
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return err.Error()
	}
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return err.Error()
	}
	si, err := s.Info(ctx)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("consumer: pending %d, ack pending %d, redelivered %d, delivered stream seq %d, ack floor %d; stream: seqs %d-%d, %d messages, %d deleted",
		ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered.Stream, ci.AckFloor.Stream,
		si.State.FirstSeq, si.State.LastSeq, si.State.Msgs, si.State.NumDeleted)
}

// relEnrich sends one enrich request, bounded by a 5s client timeout.
func relEnrich(c *events.Client, user string) (events.EnrichReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Enrich(ctx, events.EnrichRequest{UserID: user, Message: "what is my favorite number?"})
}

// TestWorkerSIGKILLMidIngestProcessesEachTurnOnce: a serve process is
// SIGKILLed while it ingests and extracts 3,000 turns of 30 users; a new one
// takes over; every turn is processed once in effect, with the facts a
// crash-free run stores.
func TestWorkerSIGKILLMidIngestProcessesEachTurnOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process and waits for River's leader to expire")
	}
	t.Parallel()
	heavy(t)
	e := newRelEnv(t, "")
	turns, want := relTurns("k", 30, 100, nil) // enough that the ingest is still running at the kill
	// --role ingest: the test asks nothing of enrich, whose pool and
	// prepared statements each start would pay for.
	first := e.startServe(e.dbURL, "--role", "ingest")
	pubDone := make(chan error, 1)
	go func() {
		_, err := e.publishAll(turns, 10)
		pubDone <- err
	}()
	waitFor(t, "a third of the turns processed", 3*time.Minute, func() (bool, string) {
		f, err := e.figures(len(turns))
		return err == nil && f.Processed >= int64(len(turns)/3), fmt.Sprint(f, err)
	}, first)
	first.kill()
	atKill, err := e.figures(len(turns))
	if err != nil {
		t.Fatal(err)
	}
	if atKill.Processed >= atKill.Published {
		t.Fatalf("everything was processed before the kill (%s): the test did not crash mid-way", atKill)
	}
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	second := e.startServe(e.dbURL, "--role", "ingest")
	begin := time.Now()
	f := e.waitAllProcessed(len(turns), 3*time.Minute, second)
	e.checkExactlyOnce(f, want, "favorite_number")
	t.Logf("figures: SIGKILL with %d of %d turns processed (%d recorded, %d pending); after restart %s; all processed %s after the restart (%d jobs of the dead process rescued by River)",
		atKill.Processed, atKill.Published, atKill.Recorded, atKill.Pending, f, time.Since(begin).Round(100*time.Millisecond), relRescued(second))
}

// relProxy forwards TCP connections to an upstream, so a test can cut it
// (listener closed, live connections closed: connection refused) and restore
// it on the same address.
type relProxy struct {
	addr, upstream string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newRelProxy(t *testing.T, upstream string) *relProxy {
	t.Helper()
	p := &relProxy{upstream: upstream, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	if err := p.restore(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// restore listens on the proxy's address again.
func (p *relProxy) restore() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(ln, c)
		}
	}()
	return nil
}

func (p *relProxy) forward(ln net.Listener, c net.Conn) {
	up, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || p.ln != ln { // cut meanwhile
		c.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}
	p.wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
}

// cut closes the listener and every live connection.
func (p *relProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// TestPostgresOutageMidIngest: Postgres is cut (through a proxy) while serve
// ingests and extracts. While it is down enrich answers degraded and the
// turns published meanwhile stay unacknowledged in JetStream; once it is back
// every turn is processed once and enrich answers normally.
func TestPostgresOutageMidIngest(t *testing.T) {
	t.Parallel()
	heavy(t)
	e := newRelEnv(t, "")
	pgURL, err := url.Parse(e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newRelProxy(t, pgURL.Host)
	pgURL.Host = proxy.addr
	viaProxy := pgURL.String()
	// Enrich gets a budget a busy machine meets when Postgres is up; with
	// Postgres cut, connections are refused at once and the reply is
	// degraded well within it.
	serve := e.startServe(viaProxy, "--enrich-timeout", "3s")
	client := events.NewClient(e.nc, e.prefix)

	before, want := relTurns("p", 20, 40, nil) // 800 before the cut
	during, wantDuring := relTurns("p", 20, 12, nil)
	for i := range during { // 240 more for the same users, later in time
		during[i].ID = "late-" + during[i].ID
		during[i].Timestamp = during[i].Timestamp.Add(time.Hour)
		during[i].AssistantResponse = "late " + during[i].AssistantResponse
	}
	for u, v := range wantDuring {
		want[u] = v
	}
	all := append(append([]events.Turn{}, before...), during...)

	if _, err := e.publishAll(before, 10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a fifth of the first turns processed", 3*time.Minute, func() (bool, string) {
		f, err := e.figures(len(all))
		return err == nil && f.Processed >= int64(len(before)/5), fmt.Sprint(f, err)
	}, serve)
	waitFor(t, "a non-degraded enrich before the outage", time.Minute, func() (bool, string) {
		r, err := relEnrich(client, "p00")
		return err == nil && !r.Degraded, fmt.Sprintf("%+v %v", r, err)
	}, serve)

	proxy.cut()
	outage := time.Now()
	atCut, _ := e.figures(len(all))
	if _, err := e.publishAll(during, 10); err != nil {
		t.Fatal(err)
	}
	// The ingest tried, failed, handed the events back, and failed again on
	// their redelivery.
	waitFor(t, "the ingest to fail twice on the outage", 2*time.Minute, func() (bool, string) {
		n := strings.Count(serve.logs.String(), "ingest: cannot record turns")
		return n >= 2, fmt.Sprintf("%d ingest failures logged", n)
	}, serve)
	degraded := 0
	for range 3 {
		r, err := relEnrich(client, "p00")
		if err != nil {
			t.Fatalf("enrich with Postgres down: %v (want a degraded reply, not an error)", err)
		}
		if !r.Degraded {
			t.Fatalf("enrich with Postgres down answered non-degraded: %+v", r)
		}
		degraded++
	}
	backlog, err := e.consumerBacklog()
	if err != nil {
		t.Fatal(err)
	}
	var recordedLate int64
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE event_id LIKE 'late-%'`).Scan(&recordedLate); err != nil {
		t.Fatal(err)
	}
	if backlog == 0 || recordedLate != 0 {
		t.Fatalf("while Postgres is down: consumer backlog %d (want > 0: nothing acknowledged), %d late turns recorded (want 0)", backlog, recordedLate)
	}

	if err := proxy.restore(); err != nil {
		t.Fatalf("restore the proxy on %s: %v", proxy.addr, err)
	}
	down := time.Since(outage)
	f := e.waitAllProcessed(len(all), 3*time.Minute, serve)
	recovered := time.Since(outage)
	waitFor(t, "the consumer to acknowledge everything", time.Minute, func() (bool, string) {
		n, err := e.consumerBacklog()
		return err == nil && n == 0, fmt.Sprint(n, err)
	}, serve)
	e.checkExactlyOnce(f, want, "favorite_number")
	waitFor(t, "a non-degraded enrich", time.Minute, func() (bool, string) {
		r, err := relEnrich(client, "p00")
		return err == nil && !r.Degraded && len(r.Facts) > 0, fmt.Sprintf("%+v %v", r, err)
	}, serve)
	if !serve.alive() {
		t.Fatalf("serve exited: %v\n%s", serve.err, serve.tail())
	}
	t.Logf("figures: Postgres cut for %s with %d of %d turns processed; %d turns published during the outage, consumer backlog %d, %d recorded; %d/%d enrich replies degraded; after restore %s; all processed %s after the cut (%d jobs left running by the cut, rescued by River)",
		down.Round(100*time.Millisecond), atCut.Processed, len(before), len(during), backlog, recordedLate, degraded, degraded, f,
		recovered.Round(100*time.Millisecond), relRescued(serve))
}

var relRescuedRE = regexp.MustCompile(`JobRescuer: Ran successfully".*"num_jobs_retry_scheduled":(\d+)`)

// relRescued is how many stuck jobs River's rescuer retried, from serve's log.
func relRescued(p *proc) int {
	n := 0
	for _, m := range relRescuedRE.FindAllStringSubmatch(p.logs.String(), -1) {
		var k int
		fmt.Sscan(m[1], &k)
		n += k
	}
	return n
}

// startRelNATS runs nats-server with JetStream on 127.0.0.1:port storing in
// dir, and waits until JetStream answers.
func startRelNATS(t *testing.T, bin string, port int, dir string) *proc {
	t.Helper()
	p := startProc(t, nil, bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	waitFor(t, "nats-server with JetStream at "+url, time.Minute, func() (bool, string) {
		if !p.alive() {
			t.Fatalf("nats-server exited: %v\n%s", p.err, p.tail())
		}
		nc, err := nats.Connect(url, nats.Timeout(time.Second))
		if err != nil {
			return false, err.Error()
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false, err.Error()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil, fmt.Sprint(err)
	}, p)
	return p
}

// TestNATSRestartMidIngestAndEnrich: the test's own nats-server (file
// storage) is SIGKILLed while turns are published and enrich requests flow,
// and restarted on the same port and store directory. memoryd reconnects, the
// durable consumer carries on, no turn is lost or stored twice, and enrich
// answers again.
func TestNATSRestartMidIngestAndEnrich(t *testing.T) {
	t.Parallel()
	heavy(t)
	bin := eventstest.ServerBin()
	if bin == "" {
		t.Skip("nats-server binary not installed")
	}
	port := eventstest.FreePort(t)
	dir := t.TempDir()
	natsSrv := startRelNATS(t, bin, port, dir)
	e := newRelEnv(t, fmt.Sprintf("nats://127.0.0.1:%d", port))
	// An enrich budget a busy machine meets, so that "answering" means
	// answered, not degraded by a slow scheduler.
	serve := e.startServe(e.dbURL, "--enrich-timeout", "3s")

	// Enrich load on its own connection, counted by outcome, until the end.
	enc, err := nats.Connect(e.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(enc.Close)
	client := events.NewClient(enc, e.prefix)
	var enrichOK, enrichDegraded, enrichErr atomic.Int64
	stopLoad := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopLoad:
				return
			case <-pace.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := client.Enrich(ctx, events.EnrichRequest{UserID: fmt.Sprintf("n%02d", i%30), Message: "what is my favorite number?"})
			cancel()
			switch {
			case err != nil:
				enrichErr.Add(1)
			case r.Degraded:
				enrichDegraded.Add(1)
			default:
				enrichOK.Add(1)
			}
		}
	}()
	stopEnrich := func() {
		select {
		case <-stopLoad:
		default:
			close(stopLoad)
		}
		<-loadDone
	}
	t.Cleanup(stopEnrich)

	turns, want := relTurns("n", 30, 30, nil)
	half := len(turns) / 2
	if _, err := e.publishAll(turns[:half], 10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "some turns processed", 3*time.Minute, func() (bool, string) {
		f, err := e.figures(len(turns))
		return err == nil && f.Processed >= int64(half/3), fmt.Sprint(f, err)
	}, serve, natsSrv)

	// The second half is published across the restart.
	var retries atomic.Int64
	pubDone := make(chan error, 1)
	go func() {
		n, err := e.publishAll(turns[half:], 10)
		retries.Store(n)
		pubDone <- err
	}()
	okBefore := enrichOK.Load()
	natsSrv.kill()
	atKill, _ := e.figures(len(turns))
	natsSrv = startRelNATS(t, bin, port, dir)
	errDuring := enrichErr.Load()
	okAtRestart := enrichOK.Load()
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	f := e.waitAllProcessed(len(turns), 3*time.Minute, serve, natsSrv)
	waitFor(t, "enrich answering after the restart", 2*time.Minute, func() (bool, string) {
		return enrichOK.Load() > okAtRestart+10, fmt.Sprintf("ok=%d degraded=%d errors=%d", enrichOK.Load(), enrichDegraded.Load(), enrichErr.Load())
	}, serve, natsSrv)
	stopEnrich()
	e.checkExactlyOnce(f, want, "favorite_number")

	// The stream holds each event once (retried publishes were deduplicated)
	// and the same durable consumer acknowledged everything.
	waitFor(t, "the consumer to acknowledge everything", time.Minute, func() (bool, string) {
		n, err := e.consumerBacklog()
		return err == nil && n == 0, fmt.Sprint(n, err)
	}, serve, natsSrv)
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(turns)) {
		t.Fatalf("stream holds %d events, want %d", info.State.Msgs, len(turns))
	}
	if !serve.alive() {
		t.Fatalf("serve exited: %v\n%s", serve.err, serve.tail())
	}
	waitFor(t, "a non-degraded enrich with facts after the restart", time.Minute, func() (bool, string) {
		r, err := relEnrich(events.NewClient(e.nc, e.prefix), "n00")
		return err == nil && !r.Degraded && len(r.Facts) > 0, fmt.Sprintf("%+v %v", r, err)
	}, serve, natsSrv)
	t.Logf("figures: nats-server SIGKILLed with %d of %d turns processed and %d published; %d publish retries; stream holds %d events; enrich ok=%d (before kill %d) degraded=%d errors=%d (%d by the restart); after restart %s",
		atKill.Processed, len(turns), half, retries.Load(), info.State.Msgs, enrichOK.Load(), okBefore, enrichDegraded.Load(), enrichErr.Load(), errDuring, f)
}

// relLLM is a fake model server that misbehaves on purpose: extractortest's
// server behind a front that can reset connections. A turn's message names
// its fault ("kind=500"); the fault applies to the first few requests for the
// turn (transient) or, for kinds ending in P, until recover() (persistent).
type relLLM struct {
	back  *extractortest.Server
	front *httptest.Server
	done  chan struct{} // closed at cleanup: releases slow replies

	recovered atomic.Bool
	mu        sync.Mutex
	requests  map[string]int // by turn id
	injected  map[string]int // faults served, by kind
}

var (
	relTurnRE   = regexp.MustCompile(`Turn (\S+) kind=(\w+)`)
	relNumberRE = regexp.MustCompile(`favorite number is (\d+)`)
)

// relFaults is how many requests of a turn fail, per transient kind.
var relFaults = map[string]int{"ok": 0, "slow": 1, "reset": 2, "429ra": 1, "429": 2, "500": 2, "trunc": 1, "schema": 1, "huge": 1}

func newRelLLM(t *testing.T, slow time.Duration) *relLLM {
	t.Helper()
	l := &relLLM{back: extractortest.NewServer(t), done: make(chan struct{}), requests: map[string]int{}, injected: map[string]int{}}
	l.back.SetHandler(l.reply(slow))
	l.front = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.front.Close)
	t.Cleanup(func() { close(l.done) }) // runs first: slow replies return
	return l
}

func (l *relLLM) URL() string { return l.front.URL + "/v1" }

// fault returns the turn's kind when this request should fail.
func (l *relLLM) fault(id, kind string, n int) (string, bool) {
	if strings.HasSuffix(kind, "P") {
		return strings.TrimSuffix(kind, "P"), !l.recovered.Load()
	}
	return kind, n <= relFaults[kind]
}

func relTurnOf(req openai.ChatCompletionRequest) (id, kind string) {
	for _, m := range req.Messages {
		if s := relTurnRE.FindStringSubmatch(m.Content); s != nil {
			return s[1], s[2]
		}
	}
	return "", "ok"
}

// serve counts the request, resets the connection when that is its fault,
// and forwards it to the extractortest server otherwise.
func (l *relLLM) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req openai.ChatCompletionRequest
	_ = json.Unmarshal(body, &req)
	id, kind := relTurnOf(req)
	if id != "" {
		l.mu.Lock()
		l.requests[id]++
		n := l.requests[id]
		l.mu.Unlock()
		if f, ok := l.fault(id, kind, n); ok && f == "reset" {
			l.count("reset")
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					if tc, ok := c.(*net.TCPConn); ok {
						_ = tc.SetLinger(0) // RST, not FIN
					}
					c.Close()
					return
				}
			}
			http.Error(w, "cannot hijack", http.StatusInternalServerError)
			return
		}
	}
	back, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimSuffix(l.back.URL(), "/v1")+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	back.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(back)
	if err != nil {
		return // the caller gave up (timeout): nothing to answer
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (l *relLLM) count(kind string) {
	l.mu.Lock()
	l.injected[kind]++
	l.mu.Unlock()
}

// reply is the extractortest handler: the turn's fault, or its extraction.
func (l *relLLM) reply(slow time.Duration) func(openai.ChatCompletionRequest) extractortest.Reply {
	return func(req openai.ChatCompletionRequest) extractortest.Reply {
		id, kind := relTurnOf(req)
		if id == "" {
			return extractortest.Content(`{"facts":{},"context":[]}`)
		}
		l.mu.Lock()
		n := l.requests[id] // counted by the front
		l.mu.Unlock()
		if strings.Contains(kind, "POISON") {
			l.count(kind)
			if kind == "POISON" {
				return extractortest.Error(http.StatusBadRequest, "this input is refused")
			}
			return extractortest.Error(http.StatusInternalServerError, "this input crashes the model")
		}
		if f, ok := l.fault(id, kind, n); ok && f != "ok" {
			l.count(f)
			switch f {
			case "slow": // past --llm-timeout
				select {
				case <-time.After(slow):
				case <-l.done:
				}
			case "429ra":
				return extractortest.Reply{Status: http.StatusTooManyRequests, Body: `{"error":{"message":"slow down"}}`, Header: http.Header{"Retry-After": {"1"}}}
			case "429":
				return extractortest.Error(http.StatusTooManyRequests, "slow down")
			case "500":
				return extractortest.Error(http.StatusInternalServerError, "boom")
			case "trunc": // the body stops mid-JSON
				full := extractortest.Content(`{"facts":{},"context":[]}`).Body
				return extractortest.Reply{Body: full[:len(full)/2]}
			case "schema": // valid JSON, wrong shape
				return extractortest.Content(`{"facts":["favorite_number",7],"context":"none"}`)
			case "huge": // over the client's 4 MiB response bound
				return extractortest.Reply{Body: `{"id":"` + strings.Repeat("x", 4<<20+1024) + `"}`}
			}
		}
		num := ""
		if s := relNumberRE.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content); s != nil {
			num = s[1]
		}
		out, _ := json.Marshal(map[string]any{
			"facts":   map[string]string{"favorite_number": num},
			"context": []map[string]string{{"q": "What happened in turn " + id + "?", "a": "turn " + id}},
		})
		return extractortest.Content(string(out))
	}
}

func (l *relLLM) injectedSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	total := 0
	for _, k := range []string{"slow", "reset", "429ra", "429", "500", "trunc", "schema", "huge", "POISON", "POISON500"} {
		if n := l.injected[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
			total += n
		}
	}
	return fmt.Sprintf("%d faults served:%s", total, b.String())
}

// relRun runs a memoryd command against e, as a user would.
func (e *relEnv) relRun(args ...string) (string, error) {
	full := append(append([]string{}, args...), "--database-url", withPoolCap(e.dbURL, 2), "--nats-url", e.natsURL, "--prefix", e.prefix, "--stream", e.stream, "--log-format", "json")
	r := runMemoryd(e.t.TempDir(), nil, 2*time.Minute, full...)
	if r.code != 0 {
		return r.stdout, fmt.Errorf("memoryd %s exited %d: %s", args[0], r.code, r.stderr)
	}
	return r.stdout, nil
}

// TestLLMFaultsAtTheWorker: the model server times out, resets connections,
// rate-limits (with and without Retry-After), fails with 500, truncates its
// body, answers with the wrong JSON shape and with a huge body. serve stays
// healthy; transient faults are absorbed by River's attempts (one request
// each, so a fault served twice costs two of the three); turns whose faults persist end
// failed, are listed by `memoryd failed`, and `memoryd retry-failed` re-runs
// them once the model recovers. Every turn ends processed.
func TestLLMFaultsAtTheWorker(t *testing.T) {
	t.Parallel()
	light(t)
	e := newRelEnv(t, "")
	llm := newRelLLM(t, 20*time.Second)
	transient := []string{"ok", "slow", "reset", "429ra", "429", "500", "trunc", "schema", "huge"}
	persistent := []string{"slowP", "resetP", "500P", "truncP", "schemaP", "hugeP"}
	turns, want := relTurns("f", 8, 9, func(u, i int) string {
		if i == 4 && u < len(persistent) {
			return persistent[u]
		}
		return transient[(u+i)%len(transient)]
	})
	httpAddr := fmt.Sprintf("127.0.0.1:%d", eventstest.FreePort(t))
	serve := e.startServe(e.dbURL, "--llm-base-url", llm.URL(), "--llm-model", "fake",
		"--llm-timeout", "6s", "--max-attempts", "3", "--job-timeout", "30s", "--workers", "16", "--llm-concurrency", "16",
		"--http", httpAddr)
	// --llm-timeout is well under the slow faults (20s) but over what a
	// healthy answer takes on a loaded machine: at 3s, ordinary answers
	// timed out at load 40-58 and, added to a turn's own transient fault,
	// used up its attempts. The probe's bound is generous for the same
	// reason: it asks whether serve answers, not how fast.
	httpc := &http.Client{Timeout: 30 * time.Second}
	// Ready, not only up: /healthz answers from the start of serve, before
	// enrich is registered.
	waitFor(t, "serve's /readyz", time.Minute, func() (bool, string) {
		resp, err := httpc.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	}, serve)
	if _, err := e.publishAll(turns, 4); err != nil {
		t.Fatal(err)
	}

	// While the faults play out, serve must keep answering /healthz and
	// enrich (a degraded enrich is an answer; an error is not).
	client := events.NewClient(e.nc, e.prefix)
	probes, polls := 0, 0
	probe := func() string {
		resp, err := httpc.Get("http://" + httpAddr + "/healthz")
		if err != nil {
			return "healthz: " + err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("healthz: %d", resp.StatusCode)
		}
		if _, err := relEnrich(client, "f00"); err != nil {
			return "enrich: " + err.Error()
		}
		probes++
		return ""
	}
	var f relFigures
	waitFor(t, "every turn processed or failed", 3*time.Minute, func() (bool, string) {
		if polls++; polls%10 == 1 {
			if msg := probe(); msg != "" && serve.alive() {
				t.Fatalf("serve unhealthy under LLM faults: %s", msg)
			}
		}
		if !serve.alive() {
			t.Fatalf("serve exited under LLM faults: %v\n%s", serve.err, serve.tail())
		}
		var err error
		f, err = e.figures(len(turns))
		return err == nil && f.Processed+f.Failed == int64(len(turns)), fmt.Sprint(f, err)
	}, serve)
	if f.Failed != int64(len(persistent)) {
		t.Fatalf("%s; want exactly the %d turns with persistent faults failed", f, len(persistent))
	}
	out, err := e.relRun("failed")
	if err != nil {
		t.Fatal(err)
	}
	for u, k := range persistent {
		id := fmt.Sprintf("f%02d-004", u)
		if !strings.Contains(out, id+"\t") {
			t.Errorf("memoryd failed does not list %s (kind %s):\n%s", id, k, out)
		}
	}
	if !strings.Contains(out, fmt.Sprintf("%d failed turn(s)", len(persistent))) {
		t.Errorf("memoryd failed:\n%s", out)
	}
	failedFigures := f
	injectedBefore := llm.injectedSummary()

	llm.recovered.Store(true)
	if out, err := e.relRun("retry-failed"); err != nil || !strings.Contains(out, fmt.Sprintf("%d failed turn(s) re-enqueued", len(persistent))) {
		t.Fatalf("retry-failed: %q, %v", out, err)
	}
	f = e.waitAllProcessed(len(turns), 2*time.Minute, serve)
	e.checkExactlyOnce(f, want, "favorite_number")
	if msg := probe(); msg != "" {
		t.Fatalf("serve unhealthy after the faults: %s", msg)
	}
	t.Logf("figures: %d turns (%d with persistent faults) under %s; before retry %s; after retry-failed %s; healthz+enrich answered %d probes",
		len(turns), len(persistent), injectedBefore, failedFigures, f, probes)
}

// TestPoisonTurnDoesNotBlockOthers: a turn the model refuses every time
// (400), and one it fails on every time (500), end failed, while the other
// turns of every user, their own included, are processed; retrying the
// poison fails it again without touching the rest.
func TestPoisonTurnDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	light(t)
	e := newRelEnv(t, "")
	llm := newRelLLM(t, 20*time.Second)
	// --role ingest: the test asks nothing of enrich.
	serve := e.startServe(e.dbURL, "--role", "ingest", "--llm-base-url", llm.URL(), "--llm-model", "fake",
		"--llm-timeout", "10s", "--max-attempts", "2", "--job-timeout", "30s")
	poison := []events.Turn{
		{ID: "x00-poison", UserID: "x00", UserMessage: "Turn x00-poison kind=POISON: my favorite number is 999", Timestamp: relT0.Add(time.Hour)},
		{ID: "x01-poison", UserID: "x01", UserMessage: "Turn x01-poison kind=POISON500: my favorite number is 999", Timestamp: relT0.Add(time.Hour)},
	}
	turns, want := relTurns("x", 6, 10, nil)
	// The poison first, so that it is ahead of everything in the stream.
	if _, err := e.publishAll(poison, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.publishAll(turns, 4); err != nil {
		t.Fatal(err)
	}
	total := len(turns) + len(poison)
	var f relFigures
	waitFor(t, "the other turns processed and the poison failed", 2*time.Minute, func() (bool, string) {
		var err error
		f, err = e.figures(total)
		return err == nil && f.Processed == int64(len(turns)) && f.Failed == int64(len(poison)), fmt.Sprint(f, err)
	}, serve)
	firstRound := f
	if f.Context != int64(len(turns)) || f.ContextDuplicates != 0 {
		t.Fatalf("%s; want one context item per good turn", f)
	}
	e.checkFacts(want)

	// attempts counts every failed job attempt of a turn.
	type state struct {
		status   string
		attempts int
	}
	poisonState := func() (map[string]state, error) {
		rows, err := e.store.Pool().Query(e.ctx, `SELECT event_id, status, attempts FROM turns WHERE event_id LIKE '%-poison'`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		m := map[string]state{}
		for rows.Next() {
			var id string
			var st state
			if err := rows.Scan(&id, &st.status, &st.attempts); err != nil {
				return nil, err
			}
			m[id] = st
		}
		return m, rows.Err()
	}
	// The refused turn fails at its first attempt (a 400 is permanent), the
	// other after --max-attempts 2.
	first, err := poisonState()
	if err != nil || first["x00-poison"] != (state{"failed", 1}) || first["x01-poison"] != (state{"failed", 2}) {
		t.Fatalf("poison turns after the first round = %+v, %v", first, err)
	}

	out, err := e.relRun("retry-failed")
	if err != nil || !strings.Contains(out, "2 failed turn(s) re-enqueued") {
		t.Fatalf("retry-failed: %q, %v", out, err)
	}
	// The re-run is bounded like the first: after two more attempts the 500
	// poison is failed again, not left pending for more.
	var again map[string]state
	waitFor(t, "the retried poison to use up its attempts", 2*time.Minute, func() (bool, string) {
		again, err = poisonState()
		return err == nil && again["x00-poison"].attempts >= 2 && again["x01-poison"].attempts >= 4, fmt.Sprintf("%+v %v", again, err)
	}, serve)
	if again["x00-poison"] != (state{"failed", 2}) || again["x01-poison"] != (state{"failed", 4}) {
		t.Fatalf("poison turns after retry-failed = %+v; want both failed again, after 1 and 2 more attempts (--max-attempts 2)", again)
	}
	f, err = e.figures(total)
	if err != nil {
		t.Fatal(err)
	}
	if f.Processed != int64(len(turns)) || f.Failed != int64(len(poison)) || f.Context != int64(len(turns)) {
		t.Fatalf("after retrying the poison: %s", f)
	}
	e.checkFacts(want)
	if !serve.alive() {
		t.Fatalf("serve exited: %v\n%s", serve.err, serve.tail())
	}
	t.Logf("figures: %d good turns of %d users behind %d poison turns (%s); first round %s; after retry-failed %s",
		len(turns), 6, len(poison), llm.injectedSummary(), firstRound, f)
}

// checkFacts checks each user's favorite_number.
func (e *relEnv) checkFacts(want map[string]string) {
	e.t.Helper()
	for user, v := range want {
		f, err := e.store.Fact(e.ctx, user, "favorite_number")
		if err != nil || f.Value != v {
			e.t.Errorf("%s favorite_number = %+v, %v; want %s", user, f, err, v)
		}
	}
}
