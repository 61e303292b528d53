package secretfile

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memoryd/memoryd/internal/secretfile/secretfiletest"
)

// Open refuses what holds no credential, saying which file and why.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path, want string
	}{
		{filepath.Join(dir, "missing"), "key file: open " + filepath.Join(dir, "missing") + ": no such file or directory"},
		{write("empty", ""), "key file: " + filepath.Join(dir, "empty") + " is empty"},
		{write("newline", "\r\n"), "key file: " + filepath.Join(dir, "newline") + " is empty"},
		{dir, "key file: read " + dir + ": is a directory"},
		{write("large", strings.Repeat("k", maxBytes+1)), "key file: " + filepath.Join(dir, "large") + " is over 64 KiB: not a credential"},
		// A shell's <(...) or a named pipe is read once: read again when
		// its writer is gone, open(2) waited for a writer for ever.
		{fifo(t, filepath.Join(dir, "fifo"), "key\n"), "key file: " + filepath.Join(dir, "fifo") + " is a pipe or a device, not a file: give a file that holds the credential"},
	} {
		if f, err := Open(tc.path, "key", nil); err == nil || err.Error() != tc.want {
			t.Errorf("Open(%s) = %v, %v; want the error %q", tc.path, f, err, tc.want)
		}
	}
}

// fifo makes a named pipe at path with a writer that writes text once it
// is opened for reading.
func fifo(t *testing.T, path, text string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Fails (ENXIO) rather than waiting when no reader opened it.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.WriteString(text)
			w.Close()
		}
	}()
	return path
}

// A file replaced by a named pipe after Open (a reconnect's Value, with
// no writer) keeps the value last read, with the warning, rather than
// blocking in open(2) with the File's lock held.
func TestValueOfAPipeDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f, err := Open(path, "test key", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { got <- f.Value() }()
	// A blocked Value fails the test by the test binary's timeout.
	if v := <-got; v != "first" {
		t.Fatalf("Value() = %q, want the value last read", v)
	}
	if !strings.Contains(logs.String(), "is a pipe or a device") {
		t.Errorf("no warning naming the pipe:\n%s", logs.String())
	}
}

// Value follows the file: replaced whole or written in place, it gives the
// new value at once (one trailing line break dropped, other spaces kept);
// a file gone or emptied gives the value last read, with one warning for
// the whole time it cannot be read, and an info line once it reads again.
func TestValueFollowsTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	replace := func(text string) { secretfiletest.Replace(t, path, text) }
	inPlace := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		// The same size written within the file system's timestamp
		// granularity would keep the stamp: move the time on, as any
		// later write does.
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
	replace("first\n")
	var logs bytes.Buffer
	f, err := Open(path, "test key", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func()
		want string
	}{
		{func() {}, "first"},
		{func() { replace("second") }, "second"},
		{func() { inPlace("third \r\n") }, "third "},
		{func() { inPlace("thirdxyz") }, "thirdxyz"}, // the same size
		{func() { os.Remove(path) }, "thirdxyz"},
		{func() {}, "thirdxyz"},
		{func() { replace("") }, "thirdxyz"},
		{func() { replace("fourth") }, "fourth"},
	}
	for i, st := range steps {
		st.do()
		if got := f.Value(); got != st.want {
			t.Fatalf("step %d: Value() = %q, want %q", i, got, st.want)
		}
	}
	if n := strings.Count(logs.String(), MsgUnread); n != 1 {
		t.Errorf("%d %q lines, want one for the time the file could not be read:\n%s", n, MsgUnread, logs.String())
	}
	if n := strings.Count(logs.String(), "credential file read again"); n != 1 {
		t.Errorf("%d lines saying the file reads again, want 1:\n%s", n, logs.String())
	}
}

// No path is no file: its credential is the one given as a value.
func TestNoFileIsTheValue(t *testing.T) {
	f, err := Open("", "key", nil)
	if f != nil || err != nil {
		t.Fatalf(`Open("") = %v, %v; want no file and no error`, f, err)
	}
	if got := f.ValueOr("given"); got != "given" {
		t.Fatalf("ValueOr of no file = %q, want the value given", got)
	}
}
