// Command testprogress runs `go test -json` with the given arguments and
// prints one line per package as it finishes ("ok", "FAIL" or "?" with its
// time), the full output of every failed test, and, when nothing finished
// for a minute, which packages are still running. A package whose test
// binary panicked (a -timeout expiry) gets its dump in full and, next to
// the closing line, one line naming the panic and the tests that were
// running; at the end, the slowest top-level tests. It exits with go
// test's status. `make test` uses it so that a long run is never minutes of
// silence:
//
//	go run ./scripts/testprogress -race -count=1 ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output events
	FailedBuild string // a package that failed to build: the import path that did not compile
	Test        string
	Elapsed     float64
	Output      string
}

// pkgState is what is known of a running package.
type pkgState struct {
	start  time.Time
	output []string            // package-level output (build errors, panics, the final FAIL line)
	tests  map[string][]string // output per test, dropped when the test passes
	failed []string            // failed tests, in order

	// panic is the package's "panic: ..." line once the test binary
	// panicked (a -timeout expiry is one), and running the tests its
	// dump names as running. test2json files the dump under whichever
	// test printed last, often one that then passes and whose output is
	// dropped: from the panic on, output is the package's.
	panic   string
	running []string
}

func main() {
	cmd := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr // build errors and vet findings, as they come
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	r := newReport(os.Stdout)
	stop := make(chan struct{})
	go r.heartbeat(time.Minute, stop)
	failed := r.read(out)
	close(stop)
	err = cmd.Wait()
	r.summary()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	case failed:
		os.Exit(1)
	}
}

type report struct {
	w     io.Writer
	begin time.Time

	mu       sync.Mutex
	running  map[string]*pkgState
	builds   map[string][]string // compiler output by import path
	last     time.Time           // when a line was last printed
	passed   int                 // packages
	failures []string            // packages
	panics   []string            // one line per package whose test binary panicked

	// Top-level tests by outcome, for the closing line. Subtests are not
	// counted: their parent passes or fails with them.
	testsPassed, testsFailed, testsSkipped int

	// slowest are the top-level tests that took longest, longest first,
	// at most slowestShown: what to look at when the run gets long.
	slowest []timedTest
}

// slowestShown is how many of the slowest tests the summary names.
const slowestShown = 10

// timedTest is a top-level test and how long it took.
type timedTest struct {
	pkg, test string
	elapsed   float64
}

func newReport(w io.Writer) *report {
	now := time.Now()
	return &report{w: w, begin: now, last: now, running: map[string]*pkgState{}, builds: map[string][]string{}}
}

// read consumes the JSON stream; it reports whether anything failed. Lines
// that are not JSON (go test prints some directly) are passed through.
func (r *report) read(in io.Reader) (failed bool) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			r.print(sc.Text() + "\n")
			continue
		}
		if r.handle(e) {
			failed = true
		}
	}
	return failed
}

func (r *report) state(pkg string) *pkgState {
	p := r.running[pkg]
	if p == nil {
		p = &pkgState{start: time.Now(), tests: map[string][]string{}}
		r.running[pkg] = p
	}
	return p
}

// handle records one event and prints a package's line when it ends; it
// reports whether the event is a failure.
func (r *report) handle(e event) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Action == "build-output" {
		r.builds[e.ImportPath] = append(r.builds[e.ImportPath], e.Output)
		return false
	}
	if e.Package == "" {
		return e.Action == "build-fail"
	}
	p := r.state(e.Package)
	switch {
	case e.Action == "output" && p.panic == "" && strings.HasPrefix(e.Output, "panic: "):
		p.panic = strings.TrimSpace(e.Output)
		p.output = append(p.output, e.Output)
	case e.Action == "output" && p.panic != "":
		p.output = append(p.output, e.Output)
		p.noteRunning(e.Output)
	case e.Action == "output" && e.Test != "":
		p.tests[e.Test] = append(p.tests[e.Test], e.Output)
	case e.Action == "output":
		p.output = append(p.output, e.Output)
	case e.Test != "" && e.Action == "fail":
		p.failed = append(p.failed, e.Test)
		r.count(e)
	case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
		delete(p.tests, e.Test)
		r.count(e)
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		delete(r.running, e.Package)
		r.finish(e, p)
		return e.Action == "fail"
	}
	return false
}

// noteRunning records a test named in a panic's "running tests:" list: the
// lines right after it that are indented by two tabs ("\t\tTestX (8m0s)").
func (p *pkgState) noteRunning(line string) {
	n := len(p.output)
	if n < 2 {
		return
	}
	inList := strings.TrimSpace(p.output[n-2]) == "running tests:" || (len(p.running) > 0 && strings.HasPrefix(p.output[n-2], "\t\t"))
	if inList && strings.HasPrefix(line, "\t\t") {
		p.running = append(p.running, strings.TrimSpace(line))
	}
}

// count tallies a top-level test's outcome.
func (r *report) count(e event) {
	if strings.Contains(e.Test, "/") {
		return
	}
	if e.Action != "skip" {
		r.noteSlow(timedTest{e.Package, e.Test, e.Elapsed})
	}
	switch e.Action {
	case "pass":
		r.testsPassed++
	case "fail":
		r.testsFailed++
	case "skip":
		r.testsSkipped++
	}
}

// noteSlow keeps t if it is among the slowestShown slowest so far.
func (r *report) noteSlow(t timedTest) {
	i := sort.Search(len(r.slowest), func(i int) bool { return r.slowest[i].elapsed < t.elapsed })
	if i >= slowestShown {
		return
	}
	r.slowest = append(r.slowest, timedTest{})
	copy(r.slowest[i+1:], r.slowest[i:])
	r.slowest[i] = t
	if len(r.slowest) > slowestShown {
		r.slowest = r.slowest[:slowestShown]
	}
}

// finish prints a package's line and, when it failed, its failed tests'
// output in full (a failed subtest's output is under its own name).
func (r *report) finish(e event, p *pkgState) {
	// The lines go test itself prints, so readers of its output know them.
	took := fmt.Sprintf("%.3fs", e.Elapsed)
	switch e.Action {
	case "pass":
		r.passed++
		r.printLocked(fmt.Sprintf("ok  \t%s\t%s\n", e.Package, took))
	case "skip":
		r.printLocked(fmt.Sprintf("?   \t%s\t[no test files]\n", e.Package))
	case "fail":
		r.failures = append(r.failures, e.Package)
		if p.panic != "" {
			r.panics = append(r.panics, panicLine(e.Package, p))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "FAIL\t%s\t%s\n", e.Package, took)
		if e.FailedBuild != "" {
			for _, line := range r.builds[e.FailedBuild] {
				b.WriteString("    " + line)
			}
		}
		for _, name := range p.failed {
			for _, line := range p.tests[name] {
				b.WriteString("    " + line)
			}
		}
		for _, line := range p.output {
			if !strings.HasPrefix(line, "FAIL") && !strings.HasPrefix(line, "ok ") && line != "PASS\n" {
				b.WriteString("    " + line)
			}
		}
		r.printLocked(b.String())
	}
}

func (r *report) print(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.printLocked(s)
}

func (r *report) printLocked(s string) {
	fmt.Fprint(r.w, s)
	r.last = time.Now()
}

// heartbeat says which packages are still running when nothing was
// printed for every.
func (r *report) heartbeat(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every / 4)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		if time.Since(r.last) >= every && len(r.running) > 0 {
			var names []string
			for pkg, p := range r.running {
				names = append(names, fmt.Sprintf("%s (%s)", pkg, time.Since(p.start).Round(time.Second)))
			}
			sort.Strings(names)
			r.printLocked(fmt.Sprintf("...   still running: %s\n", strings.Join(names, ", ")))
		}
		r.mu.Unlock()
	}
}

// summary prints the slowest tests, the packages' totals and then, alone on the last line,
// "tests: N passed, N failed, N skipped": the closing line CI reads to see
// that tests ran.
func (r *report) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	took := time.Since(r.begin).Round(time.Second)
	if len(r.slowest) > 0 {
		fmt.Fprintln(r.w, "slowest tests:")
		for _, t := range r.slowest {
			fmt.Fprintf(r.w, "  %7.1fs  %s %s\n", t.elapsed, t.pkg, t.test)
		}
	}
	if len(r.failures) == 0 {
		fmt.Fprintf(r.w, "%d packages passed in %s\n", r.passed, took)
	} else {
		fmt.Fprintf(r.w, "%d packages passed, %d failed in %s: %s\n", r.passed, len(r.failures), took, strings.Join(r.failures, " "))
	}
	// Repeated here, next to the closing line, because a log's tail is
	// often all that is kept and a timeout fails no test by name.
	for _, line := range r.panics {
		fmt.Fprintln(r.w, line)
	}
	fmt.Fprintln(r.w, closingLine(r.testsPassed, r.testsFailed, r.testsSkipped))
}

// panicLine names a package whose test binary panicked, the panic and the
// tests that were running.
func panicLine(pkg string, p *pkgState) string {
	line := pkg + ": " + p.panic
	if len(p.running) > 0 {
		line += "; running: " + strings.Join(p.running, ", ")
	}
	return line
}

// closingLine is the run's last line, in the plain form test runners of
// every language share.
func closingLine(passed, failed, skipped int) string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", passed, failed, skipped)
}
