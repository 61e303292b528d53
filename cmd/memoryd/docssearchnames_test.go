package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsSearchCollectionsSpaced: docs search reads --collections as
// enrich does, each name trimmed and empty ones dropped: "libs, notes"
// searched a collection " notes", a 404, where enrich's --collections
// "libs, notes" searched both (a walk typing the list as one writes it).
func TestDocsSearchCollectionsSpaced(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	dir := t.TempDir()
	for _, f := range []struct{ collection, name, text string }{
		{"libs", "tls.md", "# TLS\n\nConnect with a custom root CA for the staging cluster.\n"},
		{"notes", "cluster.md", "# Cluster\n\nThe staging cluster runs in Frankfurt.\n"},
	} {
		file := filepath.Join(dir, f.name)
		if err := os.WriteFile(file, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := runArgs(context.Background(), append([]string{"docs", "put", "--user", "alice", "--collection", f.collection, file}, conn...)...); code != 0 {
			t.Fatalf("docs put: exit %d\nstdout %s\nstderr %s", code, out, errOut)
		}
	}
	out, errOut, code := runArgs(context.Background(), append([]string{"docs", "search", "--user", "alice", "--collections", "libs, notes,", "staging cluster"}, conn...)...)
	if code != 0 || !strings.Contains(out, "libs/tls.md") || !strings.Contains(out, "notes/cluster.md") {
		t.Errorf("docs search --collections \"libs, notes,\": exit %d\nstdout %s\nstderr %s\nwant the chunks of both", code, out, errOut)
	}
}

// TestDocsSearchCollectionsOfNoName: a --collections that names no
// collection once trimmed (" , ") is a bad argument, exit 2. Trimmed to
// an empty list it was sent as [], which docs.search reads as every
// collection the user may read: a list of typos searched everything.
func TestDocsSearchCollectionsOfNoName(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	out, errOut, code := runArgs(context.Background(), append([]string{"docs", "search", "--user", "alice", "--collections", " , ", "staging cluster"}, conn...)...)
	if code != 2 || !strings.Contains(errOut, "--collections") {
		t.Errorf("docs search --collections \" , \": exit %d\nstdout %s\nstderr %s\nwant exit 2 naming --collections", code, out, errOut)
	}
}
