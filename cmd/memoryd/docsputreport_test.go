package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsPutReports: docs put's summary counts the unchanged files apart
// (before: "2 file(s) put" when nothing changed); a file of white space
// only is refused saying so (before: stored with 0 chunks); a file over
// the limit is refused naming the file, its size, the limit and what to
// do (before: only NATS's limit); a chunk larger than enrich's default
// budget is warned of (before: never injected, and nothing said why).
func TestDocsPutReports(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	a := write("a.md", "# A\n\nThe staging cluster is in Frankfurt.\n")
	b := write("b.md", "# B\n\nBackups run at three.\n")
	put := func(args ...string) (string, string, int) {
		return runArgs(context.Background(), append(append([]string{"docs", "put", "--user", "alice"}, args...), conn...)...)
	}
	if out, errOut, code := put("--collection", "kb", a, b); code != 0 || !strings.Contains(errOut, "2 file(s) put, 0 failed") {
		t.Fatalf("first put: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if out, errOut, code := put("--collection", "kb", a, b); code != 0 || !strings.Contains(errOut, "0 file(s) put, 2 unchanged, 0 failed") {
		t.Errorf("put again: exit %d\nstdout %s\nstderr %s\nwant 0 put, 2 unchanged", code, out, errOut)
	}

	blank := write("blank.md", " \n\n\t\n")
	if out, errOut, code := put("--collection", "kb", blank); code != 1 || !strings.Contains(out, "blank.md: failed: ") || !strings.Contains(out, "white space") {
		t.Errorf("put of white space: exit %d\nstdout %s\nstderr %s\nwant refused, saying it is white space", code, out, errOut)
	}

	big := write("big.txt", strings.Repeat("word ", 9<<20/5))
	out, errOut, code := put("--collection", "kb", big)
	size := fmt.Sprint(9 << 20 / 5 * 5)
	if code != 1 || !strings.Contains(out, "big.txt") || !strings.Contains(out, size+" bytes") || !strings.Contains(out, "max_payload") || !strings.Contains(out, "split") {
		t.Errorf("put of a 9 MiB file: exit %d\nstdout %s\nstderr %s\nwant the file, its size %s, the limit and what to do", code, out, errOut, size)
	}

	var long strings.Builder
	long.WriteString("# Long\n\n")
	for i := range 1200 {
		fmt.Fprintf(&long, "Sentence number %d of the long section. ", i)
	}
	l := write("long.md", long.String())
	out, errOut, code = put("--collection", "large", "--chunk-tokens", "4000", l)
	if code != 0 || !strings.Contains(out, "warning") || !strings.Contains(out, "max_tokens") || !strings.Contains(out, "2000") {
		t.Errorf("put of chunks over enrich's budget: exit %d\nstdout %s\nstderr %s\nwant a warning naming max_tokens 2000", code, out, errOut)
	}
	if out, _, _ := put("--collection", "kb", a); strings.Contains(out, "warning") {
		t.Errorf("put of small chunks warns: %s", out)
	}

	out, errOut, code = put("--collection", "large", "--chunk-tokens", "300", a)
	if code != 1 || !strings.Contains(out, "chunk_tokens 300") || !strings.Contains(out, "4000") {
		t.Errorf("put with another --chunk-tokens: exit %d\nstdout %s\nstderr %s\nwant refused naming both sizes", code, out, errOut)
	}
}
