package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store/storetest"
)

// TestForgetCountsDocuments: memoryd forget's JSON, memory.forget's reply,
// counts the user's documents it deleted (worker.ForgetResult had the
// count; the reply left it out, so a forget of a user holding only a
// knowledge base printed all zeros).
func TestForgetCountsDocuments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	conn := append(serveInProcess(t, "--database-url", dbURL), "--database-url", dbURL, "--log-format", "json")
	doc := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(doc, []byte("# Keys\n\nRotate the signing keys every month.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runArgs(ctx, append([]string{"docs", "put", "--user", "alice", "--collection", "handbook", doc}, conn...)...); code != 0 {
		t.Fatalf("docs put: exit %d, %s %s", code, out, errOut)
	}
	out, errOut, code := runArgs(ctx, append([]string{"forget", "--user", "alice"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"documents": 1`) {
		t.Fatalf("forget of a user with one document: exit %d, stdout %q, stderr %q; want \"documents\": 1", code, out, errOut)
	}
}
