package worker_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// crashingServer is a fake OpenAI-compatible model server that behaves as
// a supervised vLLM or llama.cpp server does on an input that kills it
// (runs it out of memory, trips a tokenizer bug): a request holding
// poison is never answered; the process dies, its listener and every
// connection closing at once (the requests in flight with it are cut
// too), and refuses connections for downFor until its supervisor has
// restarted it on the same address. Every other request is answered with
// a fact.
type crashingServer struct {
	t       testing.TB
	addr    string
	poison  []byte
	downFor time.Duration

	mu      sync.Mutex
	srv     *http.Server
	stopped bool // at the test's end: no restart
	// sock is the server's one socket, bound to addr for the server's
	// whole life (heldSocket).
	sock *heldSocket

	poisonSent atomic.Int64 // requests holding poison, each a crash
	// crashLimit, when above 0, is how many poison requests crash it;
	// the later ones are answered (a crash that came with that request by
	// chance: an OOM kill of another cause, a deploy).
	crashLimit int64
	answered   atomic.Int64
	// answerIn is how long an answer takes: 100ms when 0.
	answerIn time.Duration
	// gate, when set, holds every request to be answered (not a crashing
	// one) until it is closed; with holdFirst above 0, only the first
	// holdFirst of them.
	gate      chan struct{}
	holdFirst int64
	held      atomic.Int64
	bodies    []string     // of the requests answered, under mu
	cut       atomic.Int64 // other requests in flight at a crash
	inFlight  atomic.Int64
	// beforeCrash, when set, runs on a crashing request before the
	// server goes down with it: what happens while it is in flight.
	beforeCrash func()
}

func newCrashingServer(t testing.TB, poison string, downFor time.Duration) *crashingServer {
	t.Helper()
	sock, err := holdSocket()
	if err != nil {
		t.Fatal(err)
	}
	ln := sock.ln
	s := &crashingServer{t: t, addr: ln.Addr().String(), poison: []byte(poison), downFor: downFor, sock: sock}
	s.serve()
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stopped = true
		_ = s.srv.Close()
		_ = s.sock.ln.Close()
	})
	return s
}

// URL is the base URL an extractor.LLM takes.
func (s *crashingServer) URL() string { return "http://" + s.addr + "/v1" }

// serve serves on the socket, listening. Under mu but in
// newCrashingServer.
func (s *crashingServer) serve() {
	srv := &http.Server{Handler: http.HandlerFunc(s.handle)}
	s.srv = srv
	ln := s.sock.serving()
	go func() { _ = srv.Serve(ln) }()
}

// heldSocket is a crashingServer's listening socket, kept bound to its
// address while the server is down: closing it (the http.Server's Close,
// at a crash) only stops it listening (shutdown), so that connections to
// the address are refused as a dead process's are, and its restart makes
// it listen again. Before, a crash closed the socket and freed the port
// for the outage, and a listener of another test process running beside
// (net.Listen of port 0, as httptest's) could be given it: the worker's
// requests then met that other server (TestCrashingServerHoldsItsPortWhileDown),
// and turns meant to wait for the outage spent their attempts on its
// answers (the likeliest cause of TestServerDownWithNoRequestInFlightWaits
// failing 4 of 6 turns once in a full run, beside every other package's
// tests, and never alone). While down, SO_REUSEADDR is off, so that no other
// socket may bind the port at all; it is on again to listen, so that the
// connections closed at the crash (TIME_WAIT) do not hold the port
// against it.
type heldSocket struct {
	ln *net.TCPListener
	rc syscall.RawConn

	mu  sync.Mutex
	gen int // of the current serving; a Close of an earlier one is a no-op
	up  bool
}

// holdSocket returns a socket listening on a free port of 127.0.0.1,
// bound to it by number: a socket bound to port 0 gives its port up when
// it stops listening (Linux). The port is found with a listener of port
// 0, closed just before: another socket taking it in between makes the
// bind fail, and another port is tried.
func holdSocket() (*heldSocket, error) {
	var ln net.Listener
	var err error
	for range 10 {
		var free net.Listener
		if free, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("hold socket: %w", err)
		}
		addr := free.Addr().String()
		_ = free.Close()
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("hold socket: %w", err)
	}
	tl := ln.(*net.TCPListener)
	rc, err := tl.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("hold socket: %w", err)
	}
	return &heldSocket{ln: tl, rc: rc, up: true}, nil
}

// control runs f on the socket's descriptor.
func (h *heldSocket) control(f func(fd int) error) error {
	var ferr error
	if err := h.rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// serving returns the listener of a new serving, listening again first
// if it was stopped.
func (h *heldSocket) serving() net.Listener {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	if !h.up {
		if err := h.control(func(fd int) error {
			if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
				return err
			}
			return syscall.Listen(fd, syscall.SOMAXCONN)
		}); err != nil {
			panic(fmt.Sprint("listen again: ", err)) // the fake's own failure, not the worker's
		}
		h.up = true
	}
	return &servedListener{TCPListener: h.ln, h: h, gen: h.gen}
}

// listening reports whether the socket listens (a serving not stopped).
func (h *heldSocket) listening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.up
}

// stop stops the socket listening, if serving gen is the current one:
// connections waiting to be accepted are reset, and new ones refused.
func (h *heldSocket) stop(gen int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen != h.gen || !h.up {
		return nil
	}
	h.up = false
	return h.control(func(fd int) error {
		if err := syscall.Shutdown(fd, syscall.SHUT_RD); err != nil {
			return err
		}
		return syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 0)
	})
}

// stopAll stops the socket listening, whichever serving is current.
func (h *heldSocket) stopAll() {
	h.mu.Lock()
	gen := h.gen
	h.mu.Unlock()
	if err := h.stop(gen); err != nil {
		panic(fmt.Sprint("stop listening: ", err)) // the fake's own failure, not the worker's
	}
}

// servedListener is the socket as one http.Server serves it: its Close
// stops the socket listening, once, and only while that serving is the
// current one (http.Server.Serve closes its listener again as it
// returns, which may be after a restart).
type servedListener struct {
	*net.TCPListener
	h   *heldSocket
	gen int
}

func (l *servedListener) Close() error { return l.h.stop(l.gen) }

func (s *crashingServer) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if bytes.Contains(body, s.poison) {
		if n := s.poisonSent.Add(1); s.crashLimit == 0 || n <= s.crashLimit {
			if s.beforeCrash != nil {
				s.beforeCrash()
			}
			s.crash(w)
			return
		}
	}
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	if s.gate != nil && (s.holdFirst == 0 || s.held.Add(1) <= s.holdFirst) {
		<-s.gate
	}
	// A model's work, so that requests are in flight when one crashes it.
	time.Sleep(cmp.Or(s.answerIn, 100*time.Millisecond))
	reply := extractortest.Content(`{"facts":[{"op":"set","key":"name","value":"Alice"}],"context":[]}`)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, reply.Body)
	s.answered.Add(1)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
}

// answeredBodies returns the bodies of the requests answered so far.
func (s *crashingServer) answeredBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// crash closes the listener and every connection, the request's own last
// (hijacked: http.Server does not track it), then listens again on the same
// address after downFor.
func (s *crashingServer) crash(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.t.Errorf("hijack: %v", err)
		return
	}
	s.mu.Lock()
	s.cut.Add(s.inFlight.Load())
	s.goDownLocked()
	s.mu.Unlock()
	_ = conn.Close()
	time.AfterFunc(s.downFor, s.restart)
}

// goDown takes the server down as a process that dies does: its
// connections closed, and connections to its address refused from the
// moment it returns, until restart.
func (s *crashingServer) goDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.goDownLocked()
}

// goDownLocked is goDown under mu. The socket is stopped here, not
// only by the http.Server's Close: a Close before the Serve goroutine
// has taken the listener leaves it listening until that goroutine runs,
// and a connection made meanwhile was accepted, then reset
// (TestCrashingServerHoldsItsPortWhileDown: "connection reset by peer"),
// which the extractor takes for a crash with the request in flight.
func (s *crashingServer) goDownLocked() {
	_ = s.srv.Close()
	s.sock.stopAll()
}

func (s *crashingServer) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.sock.listening() {
		return
	}
	s.serve()
}

// crashLoopRun publishes turns of several users in waves, one poison turn
// in the first, to a worker whose model server crashes on that turn's
// request: a wave after each crash (or once the poison turn is done), so
// that turns meet every restart. It returns the server, the poison turn
// and the good turns once all are done, and logs what they took.
func crashLoopRun(t *testing.T, downFor time.Duration, crashLimit int64) (srv *crashingServer, poison store.Turn, good []store.Turn) {
	t.Helper()
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv = newCrashingServer(t, marker, downFor)
	srv.crashLimit = crashLimit
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 5
		c.JobRetryBase = 500 * time.Millisecond
	})
	const users, waves = 8, 6
	poisonDone := func() bool {
		p, err := e.store.GetTurn(e.ctx, "user-poisoned", "poison")
		return err == nil && (p.Status == "processed" || p.Status == "failed")
	}
	var keys []store.TurnKey
	for w := range waves {
		if w > 0 {
			e.waitFor(fmt.Sprint("crash ", w, " or the poison turn done"), func() (bool, string) {
				return srv.poisonSent.Load() >= int64(w) || poisonDone(), fmt.Sprint(srv.poisonSent.Load(), " crashes")
			})
		}
		for u := range users {
			k := store.TurnKey{UserID: fmt.Sprint("user-", u), EventID: fmt.Sprintf("w%d-t%d", w, u)}
			keys = append(keys, k)
			e.publish(events.Turn{ID: k.EventID, UserID: k.UserID, UserMessage: fmt.Sprintf("My name is Alice and I have %d cats.", w*users+u)})
			if w == 0 && u == users/2 {
				e.publish(events.Turn{ID: "poison", UserID: "user-poisoned", UserMessage: "My name is Alice. " + marker})
			}
		}
	}
	e.waitDone(int64(len(keys) + 1))
	poison, err = e.store.GetTurn(e.ctx, "user-poisoned", "poison")
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	retried := 0
	for _, k := range keys {
		turn, err := e.store.GetTurn(e.ctx, k.UserID, k.EventID)
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, turn)
		if turn.ProcessedAt != nil {
			lat = append(lat, turn.ProcessedAt.Sub(turn.ReceivedAt))
		}
		if turn.Attempts > 1 {
			retried++
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		t.Logf("poison: sent %d times (each a crash), %s after %d attempts: %q; other requests cut by the crashes: %d, answered: %d; "+
			"good turns: %d of %d processed, received to processed p50 %v, p90 %v, max %v; %d with more than one attempt",
			srv.poisonSent.Load(), poison.Status, poison.Attempts, poison.LastError, srv.cut.Load(), srv.answered.Load(),
			len(lat), len(good), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), retried)
	}
	return srv, poison, good
}

// TestPoisonTurnCrashLoop: a turn whose request brings the model server
// down (the connection cut mid-request, then refused until a supervisor
// restarts the server) fails after the server went down with it twice
// (the second time sent alone), with a reason saying so, while every
// other user's turn is processed, those cut by the crashes included.
// Before, it was sent at each of its 5 attempts, each a crash and an
// outage of every user's turns (p50 8.8 s, max 13.4 s here where each
// restart takes 2 s), and its failure read as a connection error.
func TestPoisonTurnCrashLoop(t *testing.T) {
	srv, poison, good := crashLoopRun(t, 2*time.Second, 0)
	for _, g := range good {
		if g.Status != "processed" {
			t.Errorf("good turn %s/%s %s: %s", g.UserID, g.EventID, g.Status, g.LastError)
		}
	}
	if poison.Status != "failed" || !strings.HasPrefix(poison.LastError, worker.CrashedReason+" 2 times") { // what retry-failed leaves out
		t.Errorf("poison turn %s: %q; want failed for its crashes", poison.Status, poison.LastError)
	}
	if n := srv.poisonSent.Load(); n != 2 {
		t.Errorf("poison turn sent %d times, each a crash; want 2", n)
	}
}

// TestServerCrashWithATurnOnceIsNotTheTurns: a turn whose request was in
// flight when the server went down once (an OOM kill of another cause, a
// deploy) is sent again, alone, and processed: one crash is not the
// turn's.
func TestServerCrashWithATurnOnceIsNotTheTurns(t *testing.T) {
	srv, poison, good := crashLoopRun(t, time.Second, 1)
	for _, g := range append(good, poison) {
		if g.Status != "processed" {
			t.Errorf("turn %s/%s %s: %s", g.UserID, g.EventID, g.Status, g.LastError)
		}
	}
	if n := srv.poisonSent.Load(); n != 2 {
		t.Errorf("turn sent %d times; want 2, the first crashing the server", n)
	}
}

// TestServerDownWithNoRequestInFlightWaits: a server that goes down with
// no request in flight (a restart of its own) is an outage as before: the
// turns that meet it wait, spending no attempt, and are processed once it
// is back.
func TestServerDownWithNoRequestInFlightWaits(t *testing.T) {
	e := setup(t)
	srv := newCrashingServer(t, "never sent", time.Second)
	srv.goDown()
	time.AfterFunc(2*time.Second, srv.restart)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	for i := range 6 {
		e.publish(events.Turn{ID: fmt.Sprint("t", i), UserID: fmt.Sprint("user-", i), UserMessage: "My name is Alice."})
	}
	if st := e.waitDone(6); st.TurnsProcessed != 6 {
		for i := range 6 {
			if turn, err := e.store.GetTurn(e.ctx, fmt.Sprint("user-", i), fmt.Sprint("t", i)); err == nil && turn.Status != "processed" {
				t.Errorf("turn t%d: %s %q", i, turn.Status, turn.LastError)
			}
		}
		t.Fatalf("stats %+v; want every turn processed after the outage, with a single attempt each", st)
	}
}

// TestPoisonTurnInAJobOfSeveralTurns: in a job of several turns (a replay's
// or a backfill's), a turn whose request brings the model server down fails
// for good at the second crash, alone: the job's turns after it, which met
// the server down (or were never sent), are processed. Before, the job's
// error was the crash's, and every turn after the poison one failed for
// good with it ("went down with this turn's request in flight 2 times").
func TestPoisonTurnInAJobOfSeveralTurns(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, time.Second)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns(marker, "r", 5, 1, "")
	// One job of the five turns, as a replay inserts them.
	insertJobOf(t, e, turns, ids)
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 5
		c.JobRetryBase = 500 * time.Millisecond
	})
	for _, turn := range settledTurns(t, e, srv, ids) {
		id := turn.EventID
		switch {
		case id == "r1" && (turn.Status != "failed" || !strings.Contains(turn.LastError, "went down with this turn's request in flight 2 times")):
			t.Errorf("poison turn %s: %s %q; want failed for its crashes", id, turn.Status, turn.LastError)
		case id != "r1" && turn.Status != "processed":
			t.Errorf("turn %s: %s %q; want processed (only the poison turn's request crashes the server)", id, turn.Status, turn.LastError)
		}
	}
	if n := srv.poisonSent.Load(); n != 2 {
		t.Errorf("poison turn sent %d times, each a crash; want 2", n)
	}
}

// settledTurns waits until none of user u's turns ids is pending (each
// processed or failed for good), and returns them in the order of ids.
func settledTurns(t *testing.T, e *env, srv *crashingServer, ids []string) []store.Turn {
	t.Helper()
	turns := make([]store.Turn, len(ids))
	e.waitFor("every turn processed or failed", func() (bool, string) {
		var st []string
		for i, id := range ids {
			turn, err := e.store.GetTurn(e.ctx, "u", id)
			if err != nil {
				t.Fatal(err)
			}
			if turn.Status == "pending" {
				return false, fmt.Sprint(id, " pending, ", srv.poisonSent.Load(), " crashes")
			}
			turns[i] = turn
			st = append(st, turn.Status)
		}
		return true, strings.Join(st, " ")
	})
	return turns
}

// poisonTurns returns n turns of user u, a second apart an hour ago, with
// event ids prefix0, prefix1, ..., of conversation (none when empty); the
// turn at index poison holds marker, the crashing server's poison.
func poisonTurns(marker, prefix string, n, poison int, conversation string) ([]store.Turn, []string) {
	at := time.Now().Add(-time.Hour)
	var turns []store.Turn
	var ids []string
	for i := range n {
		msg := fmt.Sprintf("My name is Alice and I have %d cats.", i)
		if i == poison {
			msg = "My name is Alice. " + marker
		}
		id := fmt.Sprint(prefix, i)
		ids = append(ids, id)
		turns = append(turns, store.Turn{UserID: "u", EventID: id, ConversationID: conversation, UserMessage: msg, AssistantResponse: "ok",
			TurnAt: at.Add(time.Duration(i) * time.Second)})
	}
	return turns, ids
}

// insertJobOf inserts turns of user u and one extraction job of them all
// (ids), in one transaction, as a replay inserts them.
func insertJobOf(t *testing.T, e *env, turns []store.Turn, ids []string) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, turns); err != nil {
			return err
		}
		_, err := client.InsertTx(e.ctx, tx, worker.ExtractArgs{UserID: "u", EventIDs: ids}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashingServerHoldsItsPortWhileDown: while the fake model server is
// down, its address refuses connections, as a dead process's does, and no
// other socket may take its port: a listener of another test process
// given it (net.Listen of port 0) would answer the worker's requests in
// its stead, failing turns that are meant to wait for the outage.
// Restarted, it answers on the same address.
func TestCrashingServerHoldsItsPortWhileDown(t *testing.T) {
	srv := newCrashingServer(t, "never sent", time.Hour) // restarted below
	srv.goDown()
	if c, err := net.Dial("tcp", srv.addr); err == nil {
		_ = c.Close()
		t.Fatalf("dial of the server down on %s: connected; want refused", srv.addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial of the server down on %s: %v; want refused", srv.addr, err)
	}
	if ln, err := net.Listen("tcp", srv.addr); err == nil {
		_ = ln.Close()
		t.Fatalf("another listener took the port of the server down (%s); want EADDRINUSE while it is down", srv.addr)
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("another listener on the port of the server down (%s): %v; want EADDRINUSE", srv.addr, err)
	}
	srv.restart()
	resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(`{"model":"fake"}`))
	if err != nil {
		t.Fatalf("request after the restart: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || srv.answered.Load() != 1 {
		t.Fatalf("request after the restart: status %d, %d answered; want 200, 1", resp.StatusCode, srv.answered.Load())
	}
}
