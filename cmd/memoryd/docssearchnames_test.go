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
