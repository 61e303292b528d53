package apikeys

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemovedFileBackBrokenIsLogged: each poll's log line. A key file
// removed is said once; put back unreadable (a line that does not parse)
// is said too, since its keys stay revoked (this was silent: a review).
func TestRemovedFileBackBrokenIsLogged(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(Hash("k1")+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := New(Config{File: file, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	s.poll()
	s.poll() // still missing: no second line
	if n := strings.Count(logs.String(), "revoked until it is back"); n != 1 {
		t.Fatalf("removal logged %d times, want once:\n%s", n, logs.String())
	}
	if err := os.WriteFile(file, []byte("not a key line at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.poll()
	if !strings.Contains(logs.String(), "api keys file back but not read, its keys stay revoked") {
		t.Errorf("the file put back broken was never logged; log:\n%s", logs.String())
	}
	if _, ok := s.Lookup("k1"); ok {
		t.Error("a key of the removed file works while the file back is unreadable")
	}
}

// TestRemovedFileLogsTheKeysRevoked: the removal's log line says how many
// keys the file held, which it revoked, and how many stay in force (the
// inline ones). Before, its "keys" was the count after the removal: the
// inline keys' (0 without them), never the keys revoked.
func TestRemovedFileLogsTheKeysRevoked(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte(Hash("k1")+" alice\n"+Hash("k2")+" bob\n"+Hash("k3")+" carol\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := New(Config{File: file, Text: Hash("k0") + " root", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	s.poll()
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "revoked until it is back") {
			line = l
		}
	}
	if !strings.Contains(line, " revoked=3 ") || !strings.HasSuffix(strings.TrimSpace(line), " keys=1") {
		t.Fatalf("removal logged as %q, want revoked=3 (the file's keys) and keys=1 (the inline key)", line)
	}
	// Put back with one key, removed again: that one.
	if err := os.WriteFile(file, []byte(Hash("k1")+" alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.poll()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	s.poll()
	if !strings.Contains(logs.String(), " revoked=1 ") {
		t.Fatalf("second removal logged as %q, want revoked=1", logs.String())
	}
}
