package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestImportSendsTheBytesItChecked: a file changed while it is imported
// (here, rewritten when memoryd receives the first request) is imported
// as it was checked. Before, the command checked the file, then read it
// again to send: the second request carried lines no check had seen.
func TestImportSendsTheBytesItChecked(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	file := filepath.Join(t.TempDir(), "export.jsonl")
	content := func(word, last string) string {
		var b strings.Builder
		b.WriteString(events.ExportHeader + "\n")
		for i := range 1000 { // about 1 MiB: two requests
			fmt.Fprintf(&b, `{"type":"context","question":"%s number %d? %s","answer":"Red","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e%d","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":""%s}`+"\n",
				word, i, strings.Repeat("t", 800), i, last)
		}
		return b.String()
	}
	checked := content("Tomato", "")
	if err := os.WriteFile(file, []byte(checked), 0o644); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		sent []string
	)
	// memoryd's import endpoint, recording the lines: the file is
	// rewritten before the first request is answered, so after the
	// command's first read of it.
	sub, err := nc.Subscribe(prefix+".import.*", func(m *nats.Msg) {
		var req events.ImportRequest
		if err := json.Unmarshal(m.Data, &req); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		first := len(sent) == 0
		for _, l := range req.Lines[1:] {
			sent = append(sent, string(l)+"\n")
		}
		mu.Unlock()
		if first {
			if err := os.WriteFile(file, []byte(content("Potato", `,"colour":"green"`)), 0o644); err != nil {
				t.Error(err)
			}
		}
		data, _ := json.Marshal(events.ImportReply{Imported: map[string]int64{"context": int64(len(req.Lines) - 1)}, MemoryID: "m1"})
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runArgs(context.Background(), "import", file, "--user", "bob", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json", "--timeout", "1m")
	if code != 0 || !strings.Contains(out, "context 1000") {
		t.Errorf("exit %d, %q %q; want 0 and 1000 items", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := events.ExportHeader + "\n" + strings.Join(sent, ""); got != checked {
		n := 0
		for _, l := range sent {
			if strings.Contains(l, "Potato") {
				n++
			}
		}
		t.Errorf("sent %d lines, %d of them from the file rewritten after the check; want the 1000 lines checked", len(sent), n)
	}
}

// TestImportRefusedPartWayExitsFailed: an import from stdin whose second
// request holds a line memoryd refuses (a 400) has had its first request
// written: exit 1 (failed), not 2, which says a bad flag or argument with
// nothing done. Before, it exited 2.
func TestImportRefusedPartWayExitsFailed(t *testing.T) {
	t.Parallel()
	importPartWay(t, `{"type":"context","question":"Tomato number 999? t","answer":"Red","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e999","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":"","colour":"Green"}`+"\n")
}

// TestImportCutPartWayExitsFailed: an import from stdin whose second
// request holds a line the command itself refuses (not JSON, as a pipe
// cut mid-line) has had its first request written: exit 1, saying what
// was imported, as for a line memoryd refuses; exit 2 says nothing was
// done. Before, it exited 2.
func TestImportCutPartWayExitsFailed(t *testing.T) {
	t.Parallel()
	importPartWay(t, `{"type":"context","question":"Tomato`)
}

// importPartWay imports from stdin 999 good lines (about 1 MiB: two
// requests) and then last, line 1001, which memoryd or the command
// refuses: the first request is written, so the command must exit 1,
// naming the line and saying what was imported.
func importPartWay(t *testing.T, last string) {
	t.Helper()
	_, prefix, _ := startTestEnricher(t)
	var in strings.Builder
	in.WriteString(events.ExportHeader + "\n")
	for i := range 999 {
		fmt.Fprintf(&in, `{"type":"context","question":"Tomato number %d? %s","answer":"Red","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e%d","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":""}`+"\n",
			i, strings.Repeat("t", 800), i)
	}
	in.WriteString(last)
	var out, errOut strings.Builder
	code := run(context.Background(), &cli{stdin: strings.NewReader(in.String()), stdout: &out, stderr: &errOut},
		[]string{"import", "-", "--user", "bob", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json", "--timeout", "1m"})
	if code != 1 || !strings.Contains(errOut.String(), "line 1001") || !strings.Contains(errOut.String(), "requests before the failure were imported") {
		t.Errorf("exit %d, stderr %q; want 1 naming line 1001 and what was imported", code, errOut.String())
	}
}
