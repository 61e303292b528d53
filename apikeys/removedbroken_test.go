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
