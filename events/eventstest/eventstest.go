// Package eventstest connects tests to the real NATS server and gives each test
// its own subject prefix and stream names, so tests can run in parallel and
// re-run cleanly.
package eventstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// URL is the test server: MEMORYD_TEST_NATS_URL, or the local default.
func URL() string {
	if u := os.Getenv("MEMORYD_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// Conn connects to the test server; the connection closes when the test ends.
// The dial may take up to 10 s, not nats.go's 2 s: a CI run beside other work
// (load 25 on 2 cores) once failed a test there with "dial tcp
// 127.0.0.1:4222: i/o timeout", the server up and idle.
func Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URL(), nats.Name(t.Name()), nats.Timeout(10*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("eventstest: connect to %s (is nats-server -js running? `make testservices` starts it): %v", URL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Names returns a fresh subject prefix and turn stream name. Streams whose
// names start with the stream name (the turn stream and its dead-letter
// stream) or with "KV_" and it (the forgets bucket, worker.ForgetsBucket)
// are deleted when the test ends: left, they piled up on the shared server,
// about 170 buckets a day of runs.
func Names(t testing.TB, nc *nats.Conn) (prefix, stream string) {
	t.Helper()
	keepStreamsDir(nc)
	var b [5]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	prefix, stream = "t"+id, "T"+strings.ToUpper(id)+"_TURNS"
	t.Cleanup(func() {
		js, err := jetstream.New(nc)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		names := js.StreamNames(ctx)
		var doomed []string
		for n := range names.Name() {
			if strings.HasPrefix(n, stream) || strings.HasPrefix(n, "KV_"+stream) {
				doomed = append(doomed, n)
			}
		}
		for _, n := range doomed {
			_ = js.DeleteStream(ctx, n)
		}
	})
	return prefix, stream
}

// anchorStream is a stream no test deletes (see keepStreamsDir).
const anchorStream = "MEMORYD_TEST_ANCHOR"

var anchored sync.Map // server URL → struct{}: the anchor was ensured

// keepStreamsDir makes sure nc's server holds anchorStream. nats-server 2.9
// removes an account's stream directory when its last stream is deleted,
// and a stream created at that moment fails ("could not create storage
// directory", API error 10049): the tests, which create and delete
// streams all the time, met it when one package ran alone. With one stream
// that stays, the directory stays. Best effort: a failure here leaves the
// race as it was.
func keepStreamsDir(nc *nats.Conn) {
	url := nc.ConnectedUrl()
	if _, done := anchored.Load(url); done {
		return
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: anchorStream, Subjects: []string{"memoryd-test-anchor"},
		Storage: jetstream.FileStorage, MaxMsgs: 1, MaxBytes: 1 << 10}); err == nil {
		anchored.Store(url, struct{}{})
	}
}

// ServerBin is the nats-server binary (NATS_SERVER_BIN, on PATH, or
// Debian's /usr/sbin/nats-server), or "" when none is installed.
func ServerBin() string {
	if bin := os.Getenv("NATS_SERVER_BIN"); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("nats-server"); err == nil {
		return bin
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	return ""
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// PrivateServer runs the test's own nats-server (never the shared one) on a
// free loopback port with the arguments argsFor returns for that port, waits
// until it accepts connections, and returns its URL. It is killed when the
// test ends; the test is skipped when no nats-server binary is installed.
// The server's output is in the failure message when it does not start.
func PrivateServer(t testing.TB, argsFor func(port int) []string) string {
	t.Helper()
	return StartServer(t, argsFor).URL
}

// Server is a private nats-server a test runs (StartServer).
type Server struct {
	URL    string
	bin    string
	args   []string
	addr   string
	srv    *exec.Cmd
	exited chan struct{}
	logs   *SyncBuffer
}

// StartServer is PrivateServer returning the server, which the test can
// restart.
func StartServer(t testing.TB, argsFor func(port int) []string) *Server {
	t.Helper()
	bin := ServerBin()
	if bin == "" {
		t.Skip("nats-server binary not installed")
	}
	return startServer(t, bin, argsFor)
}

// startServer is StartServer with the binary bin.
func startServer(t testing.TB, bin string, argsFor func(port int) []string) *Server {
	t.Helper()
	port := FreePort(t)
	s := &Server{bin: bin, args: argsFor(port), addr: fmt.Sprintf("127.0.0.1:%d", port), logs: new(SyncBuffer)}
	s.URL = "nats://" + s.addr
	t.Cleanup(func() {
		if s.srv != nil && s.srv.Process != nil && s.exited != nil {
			_ = s.srv.Process.Kill()
			<-s.exited
		}
	})
	s.start(t)
	return s
}

// Restart stops the server as an operator's restart does (SIGTERM, its
// state flushed), waits until it has exited, and starts it again with the
// same arguments: the same port and store directory.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	_ = s.srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server %q did not stop within 30s: %s", s.args, s.logs.String())
	}
	s.start(t)
}

// Reload makes the server read its configuration file again (SIGHUP), as
// an operator's `nats-server --signal reload` does; the server applies it
// after the signal is delivered, so the test waits for its effect.
func (s *Server) Reload(t testing.TB) {
	t.Helper()
	if err := s.srv.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// Stop kills the server (an outage, not an operator's stop) and waits
// until it has exited; Start runs it again on the same port.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if s.srv == nil {
		return
	}
	_ = s.srv.Process.Kill()
	<-s.exited
	s.srv = nil
}

// Pause stops the server's process (SIGSTOP) without closing anything: its
// connections stay open and carry nothing, as a hung server's or one
// across a partition do. Resume (or the test's end) lets it go on.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.srv.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Resume(t) })
	// A signal is delivered, not obeyed, when Signal returns: a thread
	// still running may answer one more request. Wait until every thread
	// is stopped (Linux's /proc; elsewhere the signal is all there is).
	tasks := fmt.Sprintf("/proc/%d/task", s.srv.Process.Pid)
	if _, err := os.Stat(tasks); err != nil {
		return
	}
	Eventually(t, "nats-server's threads to stop", 10*time.Second, func() (bool, string) {
		ids, err := os.ReadDir(tasks)
		if err != nil {
			return false, err.Error()
		}
		for _, id := range ids {
			b, err := os.ReadFile(tasks + "/" + id.Name() + "/stat")
			if err != nil {
				return false, err.Error()
			}
			// The state follows the command's closing parenthesis.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				return false, "thread " + id.Name() + " runs"
			}
		}
		return true, ""
	})
}

// CheckReadyzFollowsPause checks an HTTP /readyz whose NATS check makes a
// round trip over the connection to s: ok before, 503 saying the server
// "does not answer" while s is paused, ok again once it is resumed (the
// proxy's and the MCP server's: a connection gone silent was "ok").
func (s *Server) CheckReadyzFollowsPause(t testing.TB, url string) {
	t.Helper()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz before: %d %s", code, body)
	}
	s.Pause(t)
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, "does not answer") {
		t.Errorf("/readyz with the server paused: %d %s, want 503 saying the server does not answer", code, body)
	}
	s.Resume(t)
	Eventually(t, "/readyz ok once the server answers again", 30*time.Second, func() (bool, string) {
		code, body := readyz()
		return code == http.StatusOK, body
	})
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if s.srv != nil && s.srv.Process != nil {
		_ = s.srv.Process.Signal(syscall.SIGCONT)
	}
}

// Start runs a server Stop stopped again, with the same arguments, and
// waits until it accepts connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.start(t)
}

// Conn connects to the server, reconnecting for ever, quickly (every
// 20ms), so that a test sees the outage end at once. It is closed when the
// test ends.
func (s *Server) Conn(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL, nats.Timeout(10*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	s.srv = exec.Command(s.bin, s.args...)
	s.srv.Stdout, s.srv.Stderr = s.logs, s.logs
	if err := s.srv.Start(); err != nil {
		s.srv = nil
		t.Fatal(err)
	}
	exited := make(chan struct{})
	s.exited = exited
	go func(srv *exec.Cmd) { _ = srv.Wait(); close(exited) }(s.srv)
	var gone bool
	Eventually(t, fmt.Sprintf("a private nats-server %q to accept connections on %s", s.args, s.addr), 30*time.Second, func() (bool, string) {
		select {
		case <-exited:
			gone = true
			return true, ""
		default:
		}
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			return false, err.Error() + "; server output: " + s.logs.String()
		}
		c.Close()
		return true, ""
	})
	if gone {
		t.Fatalf("private nats-server %q exited: %s", s.args, s.logs.String())
	}
}

// pollInterval is how often Poll asks its condition again: often enough that
// a test waits little past the moment the condition holds, rarely enough
// that a condition querying Postgres or NATS does not load a busy machine.
const pollInterval = 20 * time.Millisecond

// Poll asks cond at once and then every 20ms until it holds or limit has
// passed, and returns whether it held and cond's last state (a description
// for the failure message). It is for conditions another goroutine or
// process makes true; limit is a generous bound, not an expected duration.
func Poll(limit time.Duration, cond func() (ok bool, state string)) (bool, string) {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok || time.Now().After(deadline) {
			return ok, state
		}
		<-tick.C
	}
}

// Eventually polls cond as Poll does and fails the test when it has not held
// within limit, naming what was awaited and cond's last state. Call it from
// the test's goroutine (it calls t.Fatalf).
func Eventually(t testing.TB, what string, limit time.Duration, cond func() (ok bool, state string)) {
	t.Helper()
	if ok, state := Poll(limit, cond); !ok {
		if state == "" {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		t.Fatalf("timed out after %s waiting for %s; last state: %s", limit, what, state)
	}
}

// SyncBuffer is a bytes.Buffer that several goroutines may write and read
// at once: a child process's output copier, a logger, and the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// SubjectMsgs counts the messages st holds on subject (a wildcard sums). A
// literal subject is counted through a wildcard over its parent:
// nats-server 2.9.10 can report none for a literal subject that holds
// messages (its first ones deleted while others were published).
func SubjectMsgs(ctx context.Context, st jetstream.Stream, subject string) (uint64, error) {
	filter := subject
	literal := !strings.Contains(subject, "*") && !strings.HasSuffix(subject, ">")
	if literal {
		filter = subject[:strings.LastIndexByte(subject, '.')+1] + "*"
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	if literal {
		return info.State.Subjects[subject], nil
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}
