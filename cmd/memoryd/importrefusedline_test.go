package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// A line the service refuses is the file's fault as a line the command
// refuses is: exit 2 naming the line, without the flags' usage hint.
func TestImportLineTheServiceRefusesHasNoUsageHint(t *testing.T) {
	t.Parallel()
	_, prefix, _ := startTestEnricher(t)
	file := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(file, []byte(events.ExportHeader+"\n"+`{"type":"no such type"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(context.Background(), "import", file, "--user", "bob", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")
	if code != 2 || !strings.Contains(errOut, "line 2") || strings.Contains(errOut, "for usage") {
		t.Errorf("a line the service refuses: exit %d, stderr %q; want 2 naming line 2, without the usage hint", code, errOut)
	}
}
