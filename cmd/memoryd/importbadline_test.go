package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestImportFileBadLineLaterWritesNothing: a file spanning two requests
// whose second request holds a line memoryd refuses (a field given twice,
// an unknown field) is refused whole before the first request, with the
// reason memoryd gives; before, the first request's rows were committed
// and the second got a 400.
func TestImportFileBadLineLaterWritesNothing(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name, extra, want string
	}{
		{"given twice", `,"Answer":"Green"`, `line 1001: answer is given twice (as "answer" and "Answer")`},
		{"unknown field", `,"colour":"Green"`, `line 1001: context: json: unknown field "colour"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			user := "bob-" + strings.ReplaceAll(tt.name, " ", "-")
			conn := []string{"--user", user, "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json", "--timeout", "1m"}
			var f strings.Builder
			f.WriteString(events.ExportHeader + "\n")
			for i := range 1000 { // about 1 MiB: two requests
				extra := ""
				if i == 999 {
					extra = tt.extra
				}
				fmt.Fprintf(&f, `{"type":"context","question":"Tomato number %d? %s","answer":"Red","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e%d","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":""%s}`+"\n",
					i, strings.Repeat("t", 800), i, extra)
			}
			path := filepath.Join(t.TempDir(), "bad.jsonl")
			if err := os.WriteFile(path, []byte(f.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runArgs(ctx, append([]string{"import", path}, conn...)...)
			if code != 2 || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "the file is refused whole, nothing was imported") ||
				strings.Contains(errOut, "requests before the failure") {
				t.Errorf("exit %d, stderr %q; want 2, %q and nothing imported", code, errOut, tt.want)
			}
			var got bytes.Buffer
			if err := st.Export(ctx, user, &got); err != nil {
				t.Fatal(err)
			}
			if got.String() != events.ExportHeader+"\n" {
				t.Errorf("a refused file wrote %d bytes of memory", got.Len()-len(events.ExportHeader)-1)
			}
		})
	}
}
