package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestExportImportCommands: `memoryd export` writes the store's export (to
// stdout or -o FILE), `memoryd import` reads it back (FILE or stdin) after
// a forget and the memory exports to the same bytes; a bad file is an error
// naming its line.
func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "x", TurnAt: at, Scope: "app-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Porto", SourceAt: at, EventID: "e1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Tea?", Answer: "Green", CreatedAt: at, EventID: "e1"}}); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := st.Export(ctx, "alice", &want); err != nil {
		t.Fatal(err)
	}
	conn := []string{"--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json", "--timeout", "1m"}
	cmd := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		out, errOut, code := runArgs(ctx, append(args, conn...)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d: %s", args, code, wantCode, errOut)
		}
		return out, errOut
	}

	out, errOut := cmd(0, "export")
	if out != want.String() || !strings.Contains(out, `"scope":"app-1"`) || errOut != "" {
		t.Fatalf("export to stdout:\n%s\nwant\n%s\n(stderr %q)", out, want.String(), errOut)
	}
	// A user with nothing: the header alone, exit 0, and a word of it on
	// stderr (a newcomer's misspelt user id looked like an empty success).
	if out, errOut, code := runArgs(ctx, "export", "--user", "alcie", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json"); code != 0 ||
		out != events.ExportHeader+"\n" || !strings.Contains(errOut, "alcie has nothing stored") {
		t.Errorf("export of a user with nothing: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	file := filepath.Join(t.TempDir(), "alice.jsonl")
	if _, errOut := cmd(0, "export", "-o", file); !strings.Contains(errOut, "4 line(s) written to "+file+": a header and 3 of alice's memory") {
		t.Errorf("export -o: stderr %q", errOut)
	}
	// "-" is stdout, as import's "-" is stdin (it wrote a file named "-").
	if out, _ := cmd(0, "export", "-o", "-"); out != want.String() {
		t.Fatalf("export -o - to stdout:\n%s\nwant\n%s", out, want.String())
	}
	if _, err := os.Stat("-"); err == nil {
		t.Fatal(`export -o - wrote a file named "-"`)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("export -o wrote %q, %v", got, err)
	}

	if _, _, err := st.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if out, _ := cmd(0, "import", file); !strings.Contains(out, "fact 1,") || !strings.Contains(out, "context 1,") {
		t.Errorf("import: %q", out)
	}
	if out, _ := cmd(0, "export"); out != want.String() {
		t.Errorf("export after forget and import:\n%s\nwant\n%s", out, want.String())
	}
	// Stdin, a second time: nothing new.
	var out2, errOut2 bytes.Buffer
	if code := run(ctx, &cli{stdin: bytes.NewReader(want.Bytes()), stdout: &out2, stderr: &errOut2}, append([]string{"import", "-", "--json"}, conn...)); code != 0 {
		t.Fatalf("import from stdin: exit %d: %s", code, errOut2.String())
	}
	if out := out2.String(); !strings.Contains(out, `"fact": 0`) || !strings.Contains(out, `"context": 0`) {
		t.Errorf("import from stdin again: %s", out)
	}

	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(events.ExportHeader+"\n"+`{"type":"fact","key":"k"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// memoryd's own check refuses the file before sending it: a bad argument.
	if _, errOut := cmd(2, "import", bad); !strings.Contains(errOut, "line 2:") || !strings.Contains(errOut, "nothing was imported") {
		t.Errorf("bad file: %q", errOut)
	}
	// Stdin of several requests refused in a later one: the earlier ones
	// are committed, and the command says so (it said only the failure).
	// A FILE is checked whole first and refused with nothing written.
	var ctxLine string
	for line := range strings.Lines(want.String()) {
		if strings.Contains(line, `"type":"context"`) {
			ctxLine = strings.TrimSpace(line)
		}
	}
	if ctxLine == "" {
		t.Fatalf("no context line in the export:\n%s", want.String())
	}
	var big strings.Builder
	big.WriteString(events.ExportHeader + "\n")
	for i := range 1000 { // about 1 MiB: two requests
		big.WriteString(strings.Replace(ctxLine, `"Tea?"`, fmt.Sprintf(`"Tea number %d? %s"`, i, strings.Repeat("t", 800)), 1) + "\n")
	}
	big.WriteString(`{"type":"fact","key":"k"}` + "\n")
	partial := filepath.Join(t.TempDir(), "partial.jsonl")
	if err := os.WriteFile(partial, []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut := cmd(2, "import", partial); !strings.Contains(errOut, "line 1002:") || !strings.Contains(errOut, "the file is refused whole, nothing was imported") {
		t.Errorf("a file refused in its second request: %q", errOut)
	}
	var errOut3 bytes.Buffer
	if code := run(ctx, &cli{stdin: strings.NewReader(big.String()), stdout: io.Discard, stderr: &errOut3}, append([]string{"import", "-"}, conn...)); code != 1 ||
		!strings.Contains(errOut3.String(), "line 1002:") || !strings.Contains(errOut3.String(), "the requests before the failure were imported into alice") {
		t.Errorf("stdin refused in its second request: exit %d, %q", code, errOut3.String())
	}
	notExport := filepath.Join(t.TempDir(), "notjson.jsonl")
	if err := os.WriteFile(notExport, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Bad input, as a line the service refuses is: exit 2 (it was 1).
	if _, errOut := cmd(2, "import", notExport); !strings.HasPrefix(errOut, "memoryd import: line 1: not a memoryd export") {
		t.Errorf("a file that is not an export: %q (it said \"memoryd import: import: line 1\")", errOut)
	}
	if _, errOut := cmd(1, "import", filepath.Join(t.TempDir(), "missing")); !strings.Contains(errOut, "no such file") {
		t.Errorf("missing file: %q", errOut)
	}
	if _, errOut := cmd(2, "import", "a", "b"); !strings.Contains(errOut, "one FILE") {
		t.Errorf("two files: %q", errOut)
	}
}

// An export refused part-way (409) starts again from the first page, a
// bounded number of times, and returns only a whole export.
func TestExportStartsAgainWhenAPageIsRefused(t *testing.T) {
	t.Parallel()
	changed := &events.ServiceError{Code: 409, Description: "this export's copy is gone"}
	for _, tt := range []struct {
		conflicts int
		wantErr   bool
	}{{0, false}, {1, false}, {exportAttempts - 1, false}, {exportAttempts, true}} {
		calls := 0
		data, err := exportConsistent(func(w io.Writer) error {
			calls++
			fmt.Fprintf(w, "page of attempt %d\n", calls)
			if calls <= tt.conflicts {
				return changed
			}
			return nil
		})
		switch {
		case tt.wantErr && (err == nil || !errors.Is(err, changed) || calls != exportAttempts):
			t.Errorf("%d conflicts: %d calls, err %v; want %d calls and the conflict", tt.conflicts, calls, err, exportAttempts)
		case !tt.wantErr && (err != nil || string(data) != fmt.Sprintf("page of attempt %d\n", tt.conflicts+1)):
			t.Errorf("%d conflicts: %q, %v; want the last attempt's export alone", tt.conflicts, data, err)
		}
	}
	other := errors.New("no memoryd service answers")
	calls := 0
	if _, err := exportConsistent(func(io.Writer) error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("another error: %d calls, %v; want it at once", calls, err)
	}
}

// TestImportFileCutShortWritesNothing: an export file cut short in the
// middle of its last line (an interrupted copy) spans two requests; the
// command refuses it naming the line before sending any, so nothing of it
// is written (it committed the first request's rows, then failed on the
// cut line). Importing it whole afterwards imports everything.
func TestImportFileCutShortWritesNothing(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	conn := []string{"--user", "bob", "--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json", "--timeout", "1m"}
	var whole strings.Builder
	whole.WriteString(events.ExportHeader + "\n")
	for i := range 1000 { // about 1 MiB: two requests
		fmt.Fprintf(&whole, `{"type":"context","question":"Tomato number %d? %s","answer":"Red","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e%d","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":""}`+"\n",
			i, strings.Repeat("t", 800), i)
	}
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.jsonl")
	if err := os.WriteFile(cut, []byte(whole.String()[:whole.Len()-40]), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(ctx, append([]string{"import", cut}, conn...)...)
	// It says nothing was imported, as a line the service refuses does
	// (an ops walk's cut file was told only "line 6: not a JSON object").
	// Not with the flags' usage: the file is at fault, not the command line.
	if code != 2 || !strings.Contains(errOut, "line 1001: not a JSON object: the file is refused whole, nothing was imported") || strings.Contains(errOut, "requests before the failure") ||
		strings.Contains(errOut, "for usage") {
		t.Errorf("a file cut short: exit %d, stderr %q; want 2 naming line 1001 and nothing imported, without the usage hint", code, errOut)
	}
	var got bytes.Buffer
	if err := st.Export(ctx, "bob", &got); err != nil {
		t.Fatal(err)
	}
	if got.String() != events.ExportHeader+"\n" {
		t.Fatalf("a refused file wrote %d bytes of memory", got.Len()-len(events.ExportHeader)-1)
	}
	full := filepath.Join(dir, "full.jsonl")
	if err := os.WriteFile(full, []byte(whole.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runArgs(ctx, append([]string{"import", full}, conn...)...); code != 0 || !strings.Contains(out, "context 1000,") {
		t.Errorf("the whole file: exit %d, %q %q", code, out, errOut)
	}
}

// slowService answers prefix's endpoint for every user as a memoryd whose
// every request takes delay would (a large memory, a busy database):
// reply(n) is the n-th request's reply (from 0).
func slowService(t *testing.T, nc *nats.Conn, prefix, endpoint string, delay time.Duration, reply func(n int) any) {
	t.Helper()
	var n atomic.Int64
	sub, err := nc.Subscribe(prefix+"."+endpoint+".*", func(m *nats.Msg) {
		time.Sleep(delay) // the service's own time, not a synchronisation
		data, _ := json.Marshal(reply(int(n.Add(1) - 1)))
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	// The server has the subscription before the command's request: sent
	// unflushed, the request could find no responder (a CI run did).
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// Export and import of a large memory take as many requests as it needs,
// each within --timeout: a heavy user's export (9,164 items, 7.8 s) and
// import (29 s) failed at the default 5 s, which bounded the whole command,
// and the import was left half done.
func TestExportAndImportTimeoutBoundsEachRequest(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	const (
		pages = 6
		delay = 500 * time.Millisecond
		// A request's 500 ms five times over (an import request carries
		// 768 KiB: under load, 300 ms of delay beside a 1.2 s timeout
		// timed out); the whole's 3 s not.
		timeout = "2500ms"
	)
	slowService(t, nc, prefix, "export", delay, func(n int) any {
		r := events.ExportReply{Lines: fmt.Sprintf(`{"type":"context","question":"q%d","answer":"a"}`+"\n", n)}
		if n == 0 {
			r.Lines = events.ExportHeader + "\n" + r.Lines
		}
		if n < pages-1 {
			r.Next = fmt.Sprint(n + 1)
		}
		return r
	})
	var imports atomic.Int64
	slowService(t, nc, prefix, "import", delay, func(int) any {
		imports.Add(1)
		return events.ImportReply{Imported: map[string]int64{"context": 1}}
	})
	common := []string{"--user", "alice", "--timeout", timeout, "--nats-url", eventstest.URL(), "--prefix", prefix}

	out, errOut, code := runArgs(context.Background(), append([]string{"export"}, common...)...)
	if code != 0 || strings.Count(out, "\n") != pages+1 {
		t.Errorf("export of %d pages of %s each, --timeout %s: exit %d, %d lines, stderr %q; want every page", pages, delay, timeout, code, strings.Count(out, "\n"), errOut)
	}

	// An import of several requests (each at most 768 KiB).
	var file strings.Builder
	file.WriteString(events.ExportHeader + "\n")
	answer := strings.Repeat("x", 100_000)
	for i := 0; file.Len() < (pages-1)*events.MaxImportRequestBytes; i++ {
		// Lines memoryd takes: the command checks a file as memoryd would.
		fmt.Fprintf(&file, `{"type":"context","question":"q%d","answer":"%s","created_at":"2026-11-01T10:00:00.000000Z","event_id":"e%d","conversation_id":"","scope":"","extractor":"direct","model":"","prompt_version":""}`+"\n", i, answer, i)
	}
	path := filepath.Join(t.TempDir(), "big.jsonl")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = runArgs(context.Background(), append([]string{"import", path}, common...)...)
	if code != 0 || imports.Load() < pages {
		t.Errorf("import of %d requests of %s each, --timeout %s: exit %d, stdout %q, stderr %q; want every request sent", imports.Load(), delay, timeout, code, out, errOut)
	}
}

// An export refused part-way at every attempt says that it started again
// and why it gave up, not only the last page's 409 (the
// command's error reporting turned the wrapped 409 back into the bare
// "the service answered 409", losing that it had tried 3 times; a user
// exporting an active user saw a one-line 409 after 4 s, as if it had
// not retried at all).
func TestExportGivesUpSayingWhy(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	var firstPages atomic.Int64
	sub, err := nc.Subscribe(prefix+".export.*", func(m *nats.Msg) {
		var req events.ExportRequest
		_ = json.Unmarshal(m.Data, &req)
		reply := nats.NewMsg(m.Reply)
		if req.Cursor == "" {
			firstPages.Add(1)
			reply.Data, _ = json.Marshal(events.ExportReply{Lines: events.ExportHeader + "\n", Next: "1.x"})
		} else {
			reply.Header.Set("Nats-Service-Error-Code", "409")
			reply.Header.Set("Nats-Service-Error", "this export's copy is gone")
		}
		_ = m.RespondMsg(reply)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(context.Background(), "export", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "10s")
	if code != 1 || firstPages.Load() != exportAttempts || !strings.Contains(errOut, fmt.Sprintf("each of %d exports was refused part-way (the service answered 409 the last time: this export's copy is gone)", exportAttempts)) {
		t.Errorf("exit %d after %d attempts, stderr %q; want exit 1 after %d attempts, saying each was refused and why", code, firstPages.Load(), errOut, exportAttempts)
	}
}

// TestExportBesideAnActiveUser: `memoryd export` of a memory of several
// pages while the user's facts change all the time is one export, at the
// first try, of the memory as it was at its first page. Before, each page
// after a change was a 409 and the command gave up after 3 tries: a user
// chatting while their export ran could not get one.
func TestExportBesideAnActiveUser(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	var items []store.ContextWrite
	for i := range 6 {
		// Quotes and newlines: twice their bytes escaped, so that the
		// memory is several pages of NATS's 1 MB payload.
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question %d", i),
			Answer: fmt.Sprintf("answer %d ", i) + strings.Repeat("\"\n", 60<<10), CreatedAt: at.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := st.InsertContext(ctx, items); err != nil {
		t.Fatal(err)
	}
	count := func(i int) error {
		_, err := st.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "counter", Value: strconv.Itoa(i),
			SourceAt: at.Add(time.Duration(i) * time.Second), EventID: "e" + strconv.Itoa(i)}})
		return err
	}
	if err := count(0); err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := count(i); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	file := filepath.Join(t.TempDir(), "alice.jsonl")
	before := writes.Load()
	_, errOut, code := runArgs(ctx, "export", "--user", "alice", "-o", file, "--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "1m")
	during := writes.Load() - before
	close(stop)
	<-stopped
	if code != 0 {
		t.Fatalf("export beside %d writes: exit %d: %s", during, code, errOut)
	}
	if during < 2 {
		t.Fatalf("%d writes during the export: the test proves nothing", during)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.CheckImport(bytes.NewReader(data)); err != nil {
		t.Fatalf("the export is not one whole export: %v", err)
	}
	if n := bytes.Count(data, []byte(`{"type":"context"`)); n != len(items) || bytes.Count(data, []byte(`{"type":"fact","key":"counter"`)) != 1 {
		t.Errorf("the export holds %d context items and %d counter facts, want %d and 1", n, bytes.Count(data, []byte(`{"type":"fact","key":"counter"`)), len(items))
	}
}

// TestExportTimeoutUnderItsDefaultBoundsAPage: an export's --timeout below
// its default bounds each page, as its help says ("--timeout bounds each
// page's request"): the client made with it must not wait memoryd's own
// bound instead (a review: --timeout 1s waited a silent page for 2m15s).
func TestExportTimeoutUnderItsDefaultBoundsAPage(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	sub, err := nc.Subscribe(prefix+".export.*", func(*nats.Msg) {}) // never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := runArgs(context.Background(), "export", "--user", "alice", "--nats-url", eventstest.URL(), "--prefix", prefix, "--timeout", "1s")
		done <- result{errOut, code}
	}()
	select {
	case r := <-done:
		if r.code != 1 {
			t.Fatalf("export of a silent service, --timeout 1s: exit %d, stderr %q; want 1", r.code, r.errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("export --timeout 1s still waiting for its first page after 30 s")
	}
}
