package systest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// memorydBin is the memoryd binary TestMain built for this run.
var memorydBin string

// TestMain builds cmd/memoryd once into a temporary directory; the tests run
// that binary as users do.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "memoryd-systest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "systest:", err)
		os.Exit(1)
	}
	memorydBin = filepath.Join(dir, "memoryd")
	args := []string{"build", "-o", memorydBin}
	if os.Getenv("MEMORYD_SYSTEST_RACE") == "1" {
		args = append(args, "-race")
	}
	// go test puts its own go first on PATH.
	build := exec.Command("go", append(args, "github.com/memoryd/memoryd/cmd/memoryd")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "systest: go build memoryd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	raiseParallel()
	if signal.Ignored(syscall.SIGHUP) {
		// The suite runs under nohup: a handler makes the children start
		// with SIGHUP's default action (exec keeps an ignored signal
		// ignored, a handled one not), as from a terminal, so that
		// memoryd processes stop on it as TestServeStopsCleanlyOnSIGHUP
		// expects. The suite catches it into the handler, so it runs on.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// heavySlot admits one heavy test (thousands of turns, several processes) at
// a time: on a busy 2-core machine, two at once starve each other past their
// budgets and multiply the Postgres connections in use.
var heavySlot = make(chan struct{}, 1)

// heavy waits for the heavy-test slot; the slot is released when t ends.
// Call it after t.Parallel.
func heavy(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("heavy system test (-short)")
	}
	heavySlot <- struct{}{}
	t.Cleanup(func() { <-heavySlot })
}

// lightSlot admits one other test that runs memoryd processes or an app
// at a time, beside the heavy one: the two at once that go test's -parallel
// (GOMAXPROCS, 2 here) allowed.
var lightSlot = make(chan struct{}, 1)

// light waits for the light-test slot; the slot is released when t ends.
// Call it after t.Parallel.
func light(t *testing.T) {
	t.Helper()
	lightSlot <- struct{}{}
	t.Cleanup(func() { <-lightSlot })
}

// raiseParallel lifts go test's -parallel, unless it was given, above the
// package's test count: heavy and light bound what runs at once. With
// -parallel 2, a test waiting for the heavy slot held one of go test's
// two, so that the heavy tests often ran one at a time with nothing
// beside them (a run of 193 s, 105 s of it the heavy tests in a row).
func raiseParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "64")
	}
}

// servePoolConns is the Postgres pool size a serve process is asked for
// (pool_max_conns in its database URL).
const servePoolConns = 6

// withPoolCap adds pool_max_conns=n to a Postgres URL.
func withPoolCap(url string, n int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", url, sep, n)
}

// proc is a child process: memoryd or a nats-server.
type proc struct {
	cmd    *exec.Cmd
	logs   *eventstest.SyncBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // its exit status, once exited is closed
}

// childEnv is the test's environment without MEMORYD_* variables (a
// developer's settings must not leak into the child), plus env.
func childEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMORYD_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// startProc starts bin with args; it is SIGKILLed when the test ends.
func startProc(t *testing.T, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), logs: new(eventstest.SyncBuffer), exited: make(chan struct{})}
	p.cmd.Env = childEnv(env...)
	p.cmd.Dir = t.TempDir() // no memoryd.yaml, nothing written into the repository
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.kill)
	return p
}

// startServe runs `memoryd serve` with args (after "serve").
func startServe(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startProc(t, env, memorydBin, append([]string{"serve"}, args...)...)
}

// kill SIGKILLs the process and waits until it has exited.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits up to limit for the exit; it returns the exit
// status, or an error when the process had to be killed.
func (p *proc) stop(limit time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(limit):
		p.kill()
		return fmt.Errorf("still running %s after SIGTERM; killed", limit)
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) tail() string {
	s := p.logs.String()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	return s
}

// waitFor polls cond (eventstest.Poll) until it holds, failing the test
// after limit with cond's last state and the logs of procs. Limits are
// generous budgets: the promise is that the condition comes true, not how
// fast.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() (bool, string), procs ...*proc) {
	t.Helper()
	if ok, state := eventstest.Poll(limit, cond); !ok {
		for i, p := range procs {
			t.Logf("process %d log tail:\n%s", i, p.tail())
		}
		t.Fatalf("timed out after %s waiting for %s; last state: %s", limit, what, state)
	}
}

// result is what one memoryd command did.
type result struct {
	stdout, stderr string
	code           int // exit status; -1 when it did not exit by itself
}

// runMemoryd runs the memoryd binary with args and env (added to a
// MEMORYD_-free environment) in dir, bounded by limit.
func runMemoryd(dir string, env []string, limit time.Duration, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, memorydBin, args...)
	cmd.Env = childEnv(env...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		r.code = exit.ExitCode()
	default:
		r.code = -1
		r.stderr += fmt.Sprintf("\n[systest: %v after %s]", err, limit)
	}
	return r
}
