package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsPutOverCap: serve --max-docs-size refuses the put that would go
// over the cap, and `docs put` exits non-zero naming the cap on that file's
// line, after storing the files that fit; a bad size is a usage error
// naming the flag.
func TestDocsPutOverCap(t *testing.T) {
	t.Parallel()
	_, errOut, code := runArgs(context.Background(), "serve", "--max-docs-size", "lots")
	if code != 2 || !strings.HasPrefix(errOut, "memoryd serve: --max-docs-size: ") {
		t.Errorf("serve --max-docs-size lots: exit %d, stderr %q", code, errOut)
	}
	conn := serveInProcess(t, "--max-docs-size", "1K")
	dir := t.TempDir()
	small, big := filepath.Join(dir, "small.md"), filepath.Join(dir, "big.md")
	if err := os.WriteFile(small, []byte(strings.Repeat("A small note. ", 40)), 0o644); err != nil { // 560 bytes
		t.Fatal(err)
	}
	if err := os.WriteFile(big, []byte(strings.Repeat("A larger note. ", 40)), 0o644); err != nil { // 600 bytes
		t.Fatal(err)
	}
	out, errOut, code := runArgs(context.Background(), append([]string{"docs", "put", "--user", "alice", "--collection", "c", small, big}, conn...)...)
	if code != 1 || !strings.Contains(out, "[1/2] "+small+": 1 chunk(s)") || !strings.Contains(out, "[2/2] "+big+": failed: ") ||
		!strings.Contains(out, "documents cap") || !strings.Contains(out, "--max-docs-size") || !strings.Contains(out, "1024 bytes") {
		t.Fatalf("docs put over the cap: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// --json: a line a file, its reply or why it failed (it was ignored,
	// and the text lines printed; a walk with real documents).
	out, errOut, code = runArgs(context.Background(), append([]string{"docs", "put", "--json", "--user", "alice", "--collection", "c", small, big}, conn...)...)
	var lines []docsPutLine
	for l := range strings.Lines(out) {
		var pl docsPutLine
		if err := json.Unmarshal([]byte(l), &pl); err != nil {
			t.Fatalf("docs put --json printed %q: %v", l, err)
		}
		lines = append(lines, pl)
	}
	if code != 1 || len(lines) != 2 || lines[0].File != small || lines[0].Reply == nil || !lines[0].Reply.Unchanged ||
		lines[1].File != big || lines[1].Reply != nil || !strings.Contains(lines[1].Error, "documents cap") {
		t.Fatalf("docs put --json: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// Over the NATS server's max_payload (1 MiB by default), under memoryd's
	// own limit: the line says which limit and what to do (it said only
	// "nats: maximum payload exceeded").
	huge := filepath.Join(dir, "huge.md")
	if err := os.WriteFile(huge, []byte(strings.Repeat("A long note. ", 120_000)), 0o644); err != nil { // 1.5 MiB
		t.Fatal(err)
	}
	out, errOut, code = runArgs(context.Background(), append([]string{"docs", "put", "--user", "alice", "--collection", "c", huge}, conn...)...)
	if code != 1 || !strings.Contains(out, "larger than the NATS server takes (its max_payload of ") || !strings.Contains(out, "raise max_payload") {
		t.Fatalf("docs put over max_payload: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}
