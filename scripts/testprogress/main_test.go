package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportCountsTopLevelTestsInTheClosingLine(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"start","Package":"m/a"}`,
		`{"Action":"run","Package":"m/a","Test":"TestOne"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestOne","Elapsed":0.1}`,
		`{"Action":"run","Package":"m/a","Test":"TestTwo"}`,
		`{"Action":"run","Package":"m/a","Test":"TestTwo/sub"}`,
		`{"Action":"output","Package":"m/a","Test":"TestTwo/sub","Output":"    boom\n"}`,
		`{"Action":"fail","Package":"m/a","Test":"TestTwo/sub","Elapsed":0}`,
		`{"Action":"fail","Package":"m/a","Test":"TestTwo","Elapsed":0}`,
		`{"Action":"skip","Package":"m/a","Test":"TestThree","Elapsed":0}`,
		`{"Action":"fail","Package":"m/a","Elapsed":0.25}`,
		`{"Action":"start","Package":"m/b"}`,
		`{"Action":"pass","Package":"m/b","Test":"TestFour","Elapsed":0}`,
		`{"Action":"pass","Package":"m/b","Elapsed":1.5}`,
		`{"Action":"skip","Package":"m/c","Elapsed":0}`,
		"plain text go test printed",
	}, "\n") + "\n"

	var out strings.Builder
	r := newReport(&out)
	if failed := r.read(strings.NewReader(stream)); !failed {
		t.Error("read reported no failure for a failed package")
	}
	r.summary()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")

	for _, want := range []string{"FAIL\tm/a\t0.250s", "    boom", "ok  \tm/b\t1.500s", "?   \tm/c\t[no test files]", "plain text go test printed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if got, want := lines[len(lines)-1], "tests: 2 passed, 1 failed, 1 skipped"; got != want {
		t.Errorf("closing line = %q, want %q", got, want)
	}
	if got := lines[len(lines)-2]; !strings.HasPrefix(got, "1 packages passed, 1 failed in ") {
		t.Errorf("package totals = %q", got)
	}
	// Top-level tests that ran, longest first; no subtest, no skip.
	slow := strings.Index(out.String(), "slowest tests:\n")
	if slow < 0 {
		t.Fatalf("no slowest tests:\n%s", out.String())
	}
	want := "slowest tests:\n      0.1s  m/a TestOne\n      0.0s  m/a TestTwo\n      0.0s  m/b TestFour\n"
	if got := out.String()[slow:]; !strings.HasPrefix(got, want) {
		t.Errorf("slowest tests =\n%s\nwant\n%s", got, want)
	}
}

func TestNoteSlowKeepsTheLongestInOrder(t *testing.T) {
	r := newReport(io.Discard)
	for i := range 3 * slowestShown {
		// 0, 29, 1, 28, ...: both ends of the order arrive early.
		e := float64(i / 2)
		if i%2 == 1 {
			e = float64(3*slowestShown - 1 - i/2)
		}
		r.noteSlow(timedTest{"p", fmt.Sprint("T", e), e})
	}
	if len(r.slowest) != slowestShown {
		t.Fatalf("kept %d, want %d", len(r.slowest), slowestShown)
	}
	for i, got := range r.slowest {
		if want := float64(3*slowestShown - 1 - i); got.elapsed != want {
			t.Errorf("slowest[%d] = %v, want %v", i, got.elapsed, want)
		}
	}
}

// A test binary that times out fails no test by name, and test2json files
// its dump under whichever test printed last, often one that then passes.
// The report must still say the package panicked and which tests were
// running, next to the closing line. The stream is go test's own, from a
// package with a test that never ends.
func TestReportNamesTheTestsRunningWhenATimeoutHits(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module hang\n\ngo 1.22\n",
		"hang_test.go": `package hang

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) { t.Parallel() }

func TestStuck(t *testing.T) {
	t.Parallel()
	t.Log("waiting")
	time.Sleep(time.Hour)
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Built as this test binary was (the environment's GOFLAGS, -trimpath
	// in `make test`; -race when this binary has it), so that the hanging
	// package's standard library comes from the build cache: with GOFLAGS
	// emptied and no -race, a run on a cold cache compiled the standard
	// library a second time for it, 1m57s of the package's time beside
	// other tests on these 2-core machines against 23 s this way.
	args := []string{"test", "-json", "-timeout", "3s"}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	stream, err := cmd.Output()
	if err == nil {
		t.Fatalf("go test of a hanging test succeeded:\n%s", stream)
	}

	var out strings.Builder
	r := newReport(&out)
	if failed := r.read(bytes.NewReader(stream)); !failed {
		t.Error("read reported no failure for a package that timed out")
	}
	r.summary()
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) < 3 {
		t.Fatalf("report too short:\n%s", out.String())
	}
	got := lines[len(lines)-2]
	if !strings.HasPrefix(got, "hang: panic: test timed out after 3s; running: TestStuck (") {
		t.Errorf("line before the closing line = %q, want the timeout and TestStuck\nreport:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "goroutine ") {
		t.Errorf("report lacks the goroutine dump:\n%s", out.String())
	}
}
