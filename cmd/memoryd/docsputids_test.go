package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsPutSameIDTwice: files of one `docs put` that would get the same
// document id (their file name: the READMEs of several modules) are not
// put, each line saying which other file has its id and what to do; the
// other files are put, and the command exits 1. Before, each README was
// reported put with its chunks, each replacing the one before: the
// collection held the last one only (a walk with the Go module cache's
// READMEs). The same file named twice is no clash.
func TestDocsPutSameIDTwice(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	dir := t.TempDir()
	natsReadme := filepath.Join(dir, "nats.go", "README.md")
	pgxReadme := filepath.Join(dir, "pgx", "README.md")
	notes := filepath.Join(dir, "notes.md")
	for file, text := range map[string]string{
		natsReadme: "# NATS\n\nConnect with nats.Connect and a TLS root CA.\n",
		pgxReadme:  "# pgx\n\nA connection pool is pgxpool.New.\n",
		notes:      "# Notes\n\nThe staging cluster is in Frankfurt.\n",
	} {
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put := func(files ...string) (string, string, int) {
		return runArgs(context.Background(), append(append([]string{"docs", "put", "--user", "alice", "--collection", "mods"}, files...), conn...)...)
	}
	out, errOut, code := put(natsReadme, notes, pgxReadme)
	if code != 1 || !strings.Contains(out, "[2/3] "+notes+": 1 chunk(s)") ||
		!strings.Contains(out, "[1/3] "+natsReadme+`: failed: document id "README.md" is also `+pgxReadme+"'s") ||
		!strings.Contains(out, "[3/3] "+pgxReadme+`: failed: document id "README.md" is also `+natsReadme+"'s") ||
		!strings.Contains(out, "--id") || !strings.Contains(errOut, "1 file(s) put, 2 failed") {
		t.Errorf("docs put of two README.md: exit %d\nstdout %s\nstderr %s\nwant both refused, naming each other and --id, notes.md put", code, out, errOut)
	}
	out, errOut, code = runArgs(context.Background(), append([]string{"docs", "list", "--user", "alice", "--collection", "mods"}, conn...)...)
	if code != 0 || strings.Contains(out, "README.md") || !strings.Contains(out, "notes.md") {
		t.Errorf("docs list after the clash: exit %d\nstdout %s\nstderr %s\nwant notes.md only", code, out, errOut)
	}
	// The same file twice (also as another spelling of its path) is put
	// once, then unchanged.
	again := dir + "/./notes.md"
	out, errOut, code = put(notes, again)
	if code != 0 || !strings.Contains(out, "[2/2] "+again+": unchanged") {
		t.Errorf("docs put of one file twice: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	// Three files of one name: each line names the other two, and says
	// none of them is put ("neither" is of two).
	riverReadme := filepath.Join(dir, "river", "README.md")
	if err := os.MkdirAll(filepath.Dir(riverReadme), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(riverReadme, []byte("# River\n\nJobs in Postgres.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = put(natsReadme, pgxReadme, riverReadme)
	if code != 1 || !strings.Contains(out, "[1/3] "+natsReadme+`: failed: document id "README.md" is also `+pgxReadme+"'s and "+riverReadme+"'s") ||
		strings.Contains(out, "neither") || !strings.Contains(out, "none of them is put") {
		t.Errorf("docs put of three README.md: exit %d\nstdout %s\nstderr %s\nwant each naming the other two, none of them put", code, out, errOut)
	}
	// With --id, one file a put, each README is its own document.
	for _, f := range []struct{ id, file string }{{"nats.go/README.md", natsReadme}, {"pgx/README.md", pgxReadme}} {
		if out, errOut, code := put("--id", f.id, f.file); code != 0 {
			t.Fatalf("docs put --id %s: exit %d\nstdout %s\nstderr %s", f.id, code, out, errOut)
		}
	}
	out, _, _ = runArgs(context.Background(), append([]string{"docs", "list", "--user", "alice", "--collection", "mods"}, conn...)...)
	if !strings.Contains(out, "nats.go/README.md") || !strings.Contains(out, "pgx/README.md") {
		t.Errorf("docs list after put --id: %s", out)
	}
}

// TestDocsPutClashIsAmongFilesThatArePut: a clash is between files the
// put would send. A README.md that does not exist (a typo, or a directory
// of that name) fails on its own and does not keep the other README.md
// from being put; and a second name of one file (a symbolic link to it) is
// that file, put again unchanged, not a clash. Before, both were refused
// with "document id "README.md" is also ...'s".
func TestDocsPutClashIsAmongFilesThatArePut(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	dir := t.TempDir()
	readme := filepath.Join(dir, "pgx", "README.md")
	if err := os.MkdirAll(filepath.Dir(readme), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, []byte("# pgx\n\nA connection pool is pgxpool.New.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nats.go", "README.md")
	asDir := filepath.Join(dir, "tree", "README.md")
	if err := os.MkdirAll(asDir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "vendor", "README.md")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(readme, link); err != nil {
		t.Fatal(err)
	}
	put := func(files ...string) (string, string, int) {
		return runArgs(context.Background(), append(append([]string{"docs", "put", "--user", "alice", "--collection", "mods"}, files...), conn...)...)
	}
	out, errOut, code := put(missing, readme, asDir)
	if code != 1 || !strings.Contains(out, "[2/3] "+readme+": 1 chunk(s)") || strings.Contains(out, "is also") ||
		!strings.Contains(errOut, "1 file(s) put, 2 failed") {
		t.Errorf("docs put of a missing README.md, one that exists and a directory README.md: exit %d\nstdout %s\nstderr %s\nwant the one that exists put, the others failed on their own", code, out, errOut)
	}
	out, errOut, code = put(readme, link)
	if code != 0 || !strings.Contains(out, "[2/2] "+link+": unchanged") {
		t.Errorf("docs put of a file and a link to it: exit %d\nstdout %s\nstderr %s\nwant the second unchanged", code, out, errOut)
	}
}
