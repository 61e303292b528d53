package enricher_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// bigMemory gives user about 1 MB of exported memory (facts, a clear, and
// context items of 200 KiB of JSON each: quotes and newlines, which take
// twice their bytes escaped and cost Postgres's text search little), more
// than one export page and one import request.
func bigMemory(t *testing.T, st *store.Store, user string) {
	t.Helper()
	upsertFacts(t, st,
		store.FactWrite{UserID: user, Key: "city", Value: "Porto", SourceAt: t0, EventID: "e1"},
		store.FactWrite{UserID: user, Key: "pet", Value: "Rex \"the dog\"", SourceAt: t0, EventID: "e1"})
	if _, err := st.DeleteFact(context.Background(), user, "pet"); err != nil {
		t.Fatal(err)
	}
	var items []store.ContextWrite
	for i := range 5 {
		answer := fmt.Sprintf("answer %d ", i) + strings.Repeat("\"\n", 50<<10)
		items = append(items, store.ContextWrite{UserID: user, Question: fmt.Sprintf("%s question %d", user, i), Answer: answer, CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	insertContext(t, st, items...)
}

// slowCtx bounds a test of large exports: each page reads the whole export
// again, which on a loaded machine under the race detector takes seconds
// (TestExportOverNATS took 122 s at load 22 on 2 cores: a hang bound).
func slowCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func storeExport(t *testing.T, st *store.Store, user string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := st.Export(context.Background(), user, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestExportOverNATS: memory.export pages, concatenated, are the store's
// export byte for byte; a page fits NATS's payload; a cursor of a memory
// that changed since, or one memoryd did not give, is a 409.
func TestExportOverNATS(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	bigMemory(t, st, "alice")
	bigMemory(t, st, "bob")
	ctx := slowCtx(t)
	want := storeExport(t, st, "alice")

	var (
		got   []byte
		pages int
		req   = events.ExportRequest{UserID: "alice"}
	)
	for {
		page, err := h.client.ExportPage(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if enc := mustJSON(t, page); len(enc) > int(h.nc.MaxPayload()) {
			t.Errorf("page %d is %d bytes, over the max payload", pages, len(enc))
		}
		if !strings.HasSuffix(page.Lines, "\n") {
			t.Errorf("page %d does not end with a whole line", pages)
		}
		got, pages = append(got, page.Lines...), pages+1
		if page.Next == "" {
			break
		}
		req.Cursor = page.Next
	}
	if pages < 2 {
		t.Errorf("%d pages, want several", pages)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the pages differ from the store's export (%d and %d bytes)", len(got), len(want))
	}
	var viaClient bytes.Buffer
	if err := h.client.Export(ctx, "alice", &viaClient); err != nil || !bytes.Equal(viaClient.Bytes(), want) {
		t.Errorf("Client.Export: %d bytes, %v; want the store's export", viaClient.Len(), err)
	}

	// An export is its first page's snapshot: a change between its pages
	// is not in it, and the next export has it. Before, the next page was
	// a 409, so a user whose memory changed every few seconds (chatting
	// while the export ran) could not export at all.
	first, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice"})
	if err != nil || first.Next == "" {
		t.Fatal(first.Next, err)
	}
	upsertFacts(t, st, store.FactWrite{UserID: "alice", Key: "city", Value: "Lisbon", SourceAt: t0.Add(time.Hour), EventID: "e2"})
	if got := first.Lines + exportFrom(ctx, t, h.client, "alice", first.Next); got != string(want) {
		t.Errorf("an export with a change between its pages: %d bytes, want the %d of its first page's snapshot", len(got), len(want))
	}
	changed := storeExport(t, st, "alice")
	if bytes.Equal(changed, want) {
		t.Fatal("the change changed nothing")
	}
	if got := exportFrom(ctx, t, h.client, "alice", ""); got != string(changed) {
		t.Errorf("the export after the change: %d bytes, want the store's %d", len(got), len(changed))
	}

	// A cursor memoryd did not give, or of another user's export: a 409.
	bobs, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "bob"})
	if err != nil || bobs.Next == "" {
		t.Fatal(bobs.Next, err)
	}
	for _, cursor := range []string{bobs.Next, "1.0000", "x", "s1." + strings.Repeat("0", 32), strings.Replace(first.Next, "s", "s1", 1)} {
		_, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: cursor})
		if serviceCode(err) != 409 {
			t.Errorf("cursor %q: %v, want a 409", cursor, err)
		}
	}
	// Bob's export goes on, his cursor untouched by alice's tries.
	if got := bobs.Lines + exportFrom(ctx, t, h.client, "bob", bobs.Next); got != string(storeExport(t, st, "bob")) {
		t.Errorf("bob's export: %d bytes, want the store's", len(got))
	}
	// Its last page read, the copy of his memory is gone at once, not an
	// hour later (an export walk: a user pressing "download" 4 times left 4
	// copies).
	var copies int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM export_spools WHERE user_id = 'bob'`).Scan(&copies); err != nil || copies != 0 {
		t.Errorf("bob's export copies after his export ended: %d, %v; want none", copies, err)
	}

	// A forget between pages ends the export: its copy held what the
	// forget deleted.
	first, err = h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice"})
	if err != nil || first.Next == "" {
		t.Fatal(first.Next, err)
	}
	if _, _, err := st.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.ExportPage(ctx, events.ExportRequest{UserID: "alice", Cursor: first.Next}); serviceCode(err) != 409 {
		t.Errorf("a page after a forget: %v, want a 409", err)
	}
}

// exportFrom reads user's export over memory.export from cursor to its
// end.
func exportFrom(ctx context.Context, t *testing.T, c *events.Client, user, cursor string) string {
	t.Helper()
	var got strings.Builder
	for {
		page, err := c.ExportPage(ctx, events.ExportRequest{UserID: user, Cursor: cursor})
		if err != nil {
			t.Fatalf("export of %s from %q: %v", user, cursor, err)
		}
		got.WriteString(page.Lines)
		if page.Next == "" {
			return got.String()
		}
		cursor = page.Next
	}
}

// TestExportPagesFollowMaxPayloadAfterARestart: the pages are sized by the
// server's max_payload as it is now, and an import's requests too. Before, the limit read at the
// service's start was kept: after a NATS restart with a lower max_payload
// every export page over it was a 413 until memoryd restarted (a restore
// walk).
func TestExportPagesFollowMaxPayloadAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	setLimit := func(n int) {
		if err := os.WriteFile(conf, []byte(fmt.Sprintf("max_payload: %d\n", n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setLimit(1 << 20)
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
	nc, err := nats.Connect(srv.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st := storetest.New(t)
	prefix := randomPrefix()
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: st, Prefix: prefix, Logger: slog.New(slog.DiscardHandler), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	// About 60 KB: a few pages at the lower limit, one at the first.
	var items []store.ContextWrite
	for i := range 12 {
		items = append(items, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question %d", i),
			Answer: strings.Repeat("a long answer ", 350), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	insertContext(t, st, items...)
	const limit = 16 << 10
	setLimit(limit)
	srv.Restart(t)
	eventstest.Eventually(t, "the service's connection to have the new max_payload", time.Minute, func() (bool, string) {
		return nc.MaxPayload() == limit && nc.IsConnected(), fmt.Sprint(nc.MaxPayload(), nc.Status())
	})
	client, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	var got bytes.Buffer
	if err := events.NewClient(client, prefix).Export(slowCtx(t), "alice", &got); err != nil {
		t.Fatalf("export after max_payload went down to %d: %v", limit, err)
	}
	if want := storeExport(t, st, "alice"); !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the pages differ from the store's export (%d and %d bytes)", got.Len(), len(want))
	}
	// Client.Import splits by the lower limit too (before: it sent
	// requests of up to events.MaxImportRequestBytes, and the server
	// refused every one).
	if _, err := events.NewClient(client, prefix).Import(slowCtx(t), "bob", bytes.NewReader(got.Bytes())); err != nil {
		t.Fatalf("import of %d bytes with max_payload %d: %v", got.Len(), limit, err)
	}
	if n, err := st.CountContext(context.Background(), "bob"); err != nil || n != 12 {
		t.Errorf("bob has %d context items after the import, %v; want 12", n, err)
	}
	// A line no request under the limit can hold is named.
	huge := append(bytes.Clone(got.Bytes()), []byte(`{"type":"context","q":"`+strings.Repeat("x", limit)+`"}`+"\n")...)
	var ie *events.InputError
	if _, err := events.NewClient(client, prefix).Import(slowCtx(t), "carol", bytes.NewReader(huge)); !errors.As(err, &ie) || ie.Line != 14 || !strings.Contains(err.Error(), "max_payload") {
		t.Errorf("import of a line over max_payload: %v; want line 14 named, and max_payload", err)
	}
}

// TestImportStopsAtAForget: a user forgotten between two requests of an
// import (the forget deletes what the earlier ones wrote) gets nothing of
// the rest: the next request is a 409 and Client.Import returns
// ErrForgottenDuringImport, the user's memory empty; imported again, the
// export is whole. Before, the later requests wrote the rest of the file
// into the memory the forget began, and the import reported success
// (export and import walk: 19,345 of 60,000 items came back).
func TestImportStopsAtAForget(t *testing.T) {
	t.Parallel()
	st, h, ctx, file := setupImport(t)
	empty := events.ExportHeader + "\n"
	forgot := false
	r := &hookReader{r: bytes.NewReader(file), hook: func() {
		// Once a request has written into erin's memory, and only then.
		if !forgot && string(storeExport(t, st, "erin")) != empty {
			if _, _, err := st.ForgetUser(ctx, "erin", "erin", store.StreamPosition{}, store.RiverJobs{}); err != nil {
				t.Error(err)
			}
			forgot = true
		}
	}}
	_, err := h.client.Import(ctx, "erin", r)
	if !forgot {
		t.Fatalf("the import read its file through before a request was answered (%v): the test needs two requests", err)
	}
	if !errors.Is(err, events.ErrForgottenDuringImport) {
		t.Fatalf("import with a forget between its requests: %v; want ErrForgottenDuringImport", err)
	}
	if got := storeExport(t, st, "erin"); string(got) != empty {
		t.Errorf("after the import stopped at the forget, erin holds:\n%.300s", got)
	}
	if _, err := h.client.Import(ctx, "erin", bytes.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	if got := storeExport(t, st, "erin"); !bytes.Equal(got, file) {
		t.Errorf("imported again after the forget, the export differs")
	}
}

// setupImport runs the service over a store holding alice's bigMemory, and
// returns alice's export. A large import's requests get a minute: the 5s
// default was hit at load 12-20. (Not in start: the hung-store tests rely
// on the default.)
func setupImport(t *testing.T) (*store.Store, *harness, context.Context, []byte) {
	t.Helper()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = time.Minute })
	bigMemory(t, st, "alice")
	return st, h, slowCtx(t), storeExport(t, st, "alice")
}

// hookReader reads r at most 64 KiB a call, as a pipe does, calling hook
// before each read.
type hookReader struct {
	r    io.Reader
	hook func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	h.hook()
	return h.r.Read(p[:min(len(p), 64<<10)])
}

// TestImportOverNATS: Client.Import sends a large export in several
// requests and the user's memory is the exported one again; a bad line is
// a 400 naming its line in the file, and its request writes nothing.
func TestImportOverNATS(t *testing.T) {
	t.Parallel()
	st, h, ctx, file := setupImport(t)
	if _, _, err := st.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	reply, err := h.client.Import(ctx, "alice", bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if reply.Imported["context"] != 5 || reply.Imported["fact"] != 1 || reply.Imported["fact_clear"] != 1 {
		t.Errorf("imported %v", reply.Imported)
	}
	if got := storeExport(t, st, "alice"); !bytes.Equal(got, file) {
		t.Errorf("after forget and import over NATS the export differs")
	}

	// Line 4 of the file is bad; it is in the first request.
	lines := strings.SplitAfter(string(file), "\n")
	bad := strings.Join(lines[:3], "") + `{"type":"fact","key":"x"}` + "\n" + strings.Join(lines[3:], "")
	_, err = h.client.Import(ctx, "carol", strings.NewReader(bad))
	if serviceCode(err) != 400 || !strings.Contains(err.Error(), "line 4:") {
		t.Errorf("bad line: %v; want a 400 naming line 4", err)
	}
	if got := storeExport(t, st, "carol"); string(got) != events.ExportHeader+"\n" {
		t.Errorf("a refused import wrote:\n%.300s", got)
	}
	// A bad last line is in a later request: it is named by its line in
	// the file, and that request writes nothing (the earlier ones do).
	last := len(lines) // lines ends with "" after the final newline
	_, err = h.client.Import(ctx, "dave", strings.NewReader(string(file)+`{"type":"fact","key":"x"}`+"\n"))
	if serviceCode(err) != 400 || !strings.Contains(err.Error(), fmt.Sprintf("line %d:", last)) {
		t.Errorf("bad last line: %v; want a 400 naming line %d", err, last)
	}
	if n, err := st.CountContext(ctx, "dave"); err != nil || n == 0 || n >= 5 {
		t.Errorf("dave has %d context items, %v; want those of the first request only", n, err)
	}
	// Over the request limit: refused, naming the limit that holds (the
	// lines' bound and the room for the rest); at the limit, the size is no
	// reason (the request's lines are then judged).
	limit := events.MaxImportRequestBytes + 64<<10
	pad := func(n int) []byte {
		b := []byte(`{"user_id":"carol","pad":"`)
		b = append(b, bytes.Repeat([]byte("x"), n-len(b)-2)...)
		return append(b, `"}`...)
	}
	if code, desc := errorCode(t, h.raw(t, h.client.Subject("import", "carol"), pad(limit+1))); code != 400 || !strings.Contains(desc, fmt.Sprintf("over the %d byte limit", limit)) {
		t.Errorf("request of %d bytes: %d %s; want a 400 naming the %d byte limit", limit+1, code, desc, limit)
	}
	if code, desc := errorCode(t, h.raw(t, h.client.Subject("import", "carol"), pad(limit))); code != 400 || !strings.Contains(desc, "lines is required") {
		t.Errorf("request of %d bytes: %d %s; want it judged by its lines", limit, code, desc)
	}
	// A request without lines, or without the header first.
	for _, body := range []string{`{"user_id":"carol"}`, `{"user_id":"carol","lines":[{"type":"fact_clear","key":"k","cleared_at":"2026-11-01T10:00:00Z"}]}`} {
		if code, desc := errorCode(t, h.raw(t, h.client.Subject("import", "carol"), []byte(body))); code != 400 {
			t.Errorf("%s: %d %s, want 400", body, code, desc)
		}
	}
}

// TestExportImportOtherUsersTokenRefused: a request naming another user than
// its subject's token is refused, for export and import alike, and writes
// nothing.
func TestExportImportOtherUsersTokenRefused(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	upsertFacts(t, st, store.FactWrite{UserID: "alice", Key: "city", Value: "Porto", SourceAt: t0, EventID: "e1"})
	line := `{"type":"fact","key":"city","value":"Evil","source_at":"2027-01-01T00:00:00Z","event_id":"","conversation_id":"","extractor":"","model":"","prompt_version":"","updated_at":"2027-01-01T00:00:00Z"}`
	for _, c := range []struct{ endpoint, body string }{
		{"export", `{"user_id":"alice"}`},
		{"import", `{"user_id":"alice","lines":[` + events.ExportHeader + `,` + line + `]}`},
	} {
		code, desc := errorCode(t, h.raw(t, h.client.Subject(c.endpoint, "mallory"), []byte(c.body)))
		if code != 400 || !strings.Contains(desc, "token") {
			t.Errorf("%s for alice on mallory's subject: %d %s, want 400", c.endpoint, code, desc)
		}
	}
	if f, err := st.Fact(context.Background(), "alice", "city"); err != nil || f.Value != "Porto" {
		t.Errorf("alice's fact = %+v, %v", f, err)
	}
}

// TestScopeOverNATS: items extracted from turns of two scopes; enrich,
// search and context.list with scope A never return B's items, and without
// a scope return both. Facts are user-wide.
func TestScopeOverNATS(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	if _, err := st.InsertTurns(ctx, []store.Turn{
		{EventID: "a1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "app-a"},
		{EventID: "b1", UserID: "alice", UserMessage: "x", TurnAt: t0, Scope: "app-b"},
	}); err != nil {
		t.Fatal(err)
	}
	insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "Which garden tool do I use?", Answer: "A red garden rake", CreatedAt: t0, EventID: "a1"},
		store.ContextWrite{UserID: "alice", Question: "Which garden plant do I like?", Answer: "Garden roses", CreatedAt: t0, EventID: "b1"})
	upsertFacts(t, st, store.FactWrite{UserID: "alice", Key: "name", Value: "Alice", SourceAt: t0, EventID: "b1"})

	answers := func(items []events.ContextItem) string {
		var as []string
		for _, it := range items {
			as = append(as, it.Answer)
		}
		return strings.Join(as, "|")
	}
	for _, c := range []struct {
		scope, want string
	}{{"app-a", "A red garden rake"}, {"app-b", "Garden roses"}, {"", "both"}, {"app-c", ""}} {
		zero := 0.0
		r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: "garden", Scope: c.scope, Threshold: &zero, MaxResults: new(10)})
		got := answers(r.Context)
		if c.want == "both" {
			if len(r.Context) != 2 {
				t.Errorf("enrich without scope: %q, want both items", got)
			}
		} else if got != c.want {
			t.Errorf("enrich scope %q: %q, want %q", c.scope, got, c.want)
		}
		if len(r.Facts) != 1 {
			t.Errorf("enrich scope %q: facts %v, want the user-wide fact", c.scope, r.Facts)
		}
		s, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: "garden", Scope: c.scope})
		if err != nil || (c.want != "both" && answers(s.Results) != c.want) || (c.want == "both" && len(s.Results) != 2) {
			t.Errorf("search scope %q: %q, %v", c.scope, answers(s.Results), err)
		}
		l, err := h.client.ListContext(ctx, events.ContextListRequest{UserID: "alice", Scope: c.scope})
		if err != nil || (c.want != "both" && answers(l.Items) != c.want) || (c.want == "both" && len(l.Items) != 2) {
			t.Errorf("list scope %q: %q, %v", c.scope, answers(l.Items), err)
		}
	}
	long := strings.Repeat("s", events.MaxScopeBytes+1)
	if _, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: "garden", Scope: long}); serviceCode(err) != 400 {
		t.Errorf("a scope over the limit: %v, want 400", err)
	}
}

// TestStoredItemsCanBeImportedBack: store and context.update refuse a
// pair whose export line no import request could take (control
// characters are 6 bytes each in JSON); the largest pair they take
// exports and imports back. Before, store took such an item, and the
// user's export could not be imported: "line 2: over 786432 bytes" (export
// and import walk).
func TestStoredItemsCanBeImportedBack(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = time.Minute })
	ctx := slowCtx(t)
	ctrl := func(n int) string { return strings.Repeat("\x01", n) }
	_, err := h.client.Store(ctx, events.StoreRequest{UserID: "zed", Question: "Q" + ctrl(20000), Answer: "A" + ctrl(120000)})
	if serviceCode(err) != 400 || !strings.Contains(err.Error(), "imported back") {
		t.Fatalf("store of a pair of 840 KB as JSON: %v; want a 400 saying it could not be imported back", err)
	}
	r, err := h.client.Store(ctx, events.StoreRequest{UserID: "zed", Question: "Q" + ctrl(20000), Answer: "A" + ctrl(100000)})
	if err != nil {
		t.Fatalf("store of a pair of 720 KB as JSON: %v", err)
	}
	more := "A" + ctrl(120000)
	if _, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: "zed", ID: r.ID, Answer: &more}); serviceCode(err) != 400 || !strings.Contains(err.Error(), "imported back") {
		t.Fatalf("update of its answer to 720 KB as JSON: %v; want a 400", err)
	}
	file := storeExport(t, st, "zed")
	if _, err := h.client.Import(ctx, "zed2", bytes.NewReader(file)); err != nil {
		t.Fatalf("import of an export holding the largest pair store takes: %v", err)
	}
	if got := storeExport(t, st, "zed2"); !bytes.Equal(got, file) {
		t.Error("the pair imported back differs")
	}
}

// TestLargestPairWithLongestFieldsImportsBack: the largest pair
// context.update takes (maxExportedPair as JSON, control characters
// 6 bytes each), on an item whose other fields are all at their import
// limits and all control characters, exports in a line Client.Import
// takes back whole.
func TestLargestPairWithLongestFieldsImportsBack(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, func(c *enricher.Config) { c.WriteTimeout = time.Minute })
	ctx := slowCtx(t)
	ctrl := func(n int) string { return strings.Repeat("\x01", n) }
	ids := insertContext(t, st, store.ContextWrite{UserID: "zed", Question: "q", Answer: "a", CreatedAt: t0})
	if _, err := st.Pool().Exec(ctx, `UPDATE context SET event_id = $2, conversation_id = $2, scope = $3,
		extractor = $2, model = $2, prompt_version = $2 WHERE id = $1`, ids[0], ctrl(256), ctrl(128)); err != nil {
		t.Fatal(err)
	}
	// 770,048 bytes as JSON: "Q" and 10,000 control characters, "A" and 118,341.
	q, a := "Q"+ctrl(10000), "A"+ctrl(118341)
	if _, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: "zed", ID: ids[0], Question: &q, Answer: &a}); err != nil {
		t.Fatalf("update to the largest pair: %v", err)
	}
	a2 := a + "\x01"
	if _, err := h.client.UpdateContext(ctx, events.ContextUpdateRequest{UserID: "zed", ID: ids[0], Answer: &a2}); serviceCode(err) != 400 {
		t.Fatalf("update to one control character more: %v; want a 400", err)
	}
	file := storeExport(t, st, "zed")
	longest := 0
	for l := range bytes.Lines(file) {
		longest = max(longest, len(l))
	}
	t.Logf("export line: %d bytes (with its newline); the bound: %d", longest, events.MaxImportRequestBytes)
	if _, err := h.client.Import(ctx, "zed2", bytes.NewReader(file)); err != nil {
		t.Fatalf("import of the largest pair with the longest fields: %v", err)
	}
	if got := storeExport(t, st, "zed2"); !bytes.Equal(got, file) {
		t.Error("the pair imported back differs")
	}
}

// TestImportLineFieldGivenTwice: a line of an import naming a field twice,
// in the same or another case, is a 400 naming the line and writes
// nothing, as a request's own field given twice is (docs/protocol.md,
// "Requests, replies and errors"): encoding/json keeps the last, so
// {"value":"Porto","Value":"Lisbon"} was imported as Lisbon where any
// other reader of the export file sees Porto (found by a newcomer's walk).
func TestImportLineFieldGivenTwice(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	dupFirst := "" // a key given before "key"
	fact := func(dup string) string {
		return `{"type":"fact",` + dupFirst + `"key":"location","value":"Porto"` + dup + `,"source_at":"2026-11-01T10:00:00.000000Z","event_id":"e1","conversation_id":"","extractor":"llm","model":"m","prompt_version":"v3","updated_at":"2026-11-01T10:00:02.000000Z"}`
	}
	for _, tt := range []struct{ dup, want string }{
		{`,"Value":"Lisbon"`, `line 3: value is given twice (as "value" and "Value")`},
		{`,"value":"Lisbon"`, `line 3: value is given twice (as "value" and "value")`},
		// Named as the format spells it, not as the first key sent.
		{`"KEY":"home",`, `line 3: key is given twice (as "KEY" and "key")`},
	} {
		plain, dup := fact(""), tt.dup
		if strings.HasSuffix(dup, ",") {
			dupFirst, dup = dup, ""
		}
		body := `{"user_id":"carol","lines":[` + events.ExportHeader + `,` + plain + `,` + fact(dup) + `]}`
		dupFirst = ""
		code, desc := errorCode(t, h.raw(t, h.client.Subject("import", "carol"), []byte(body)))
		if code != 400 || !strings.Contains(desc, tt.want) || !strings.Contains(desc, "nothing of this request was imported") {
			t.Errorf("import line with %s: %d %q; want a 400 saying %q", tt.dup, code, desc, tt.want)
		}
		if got := storeExport(t, st, "carol"); string(got) != events.ExportHeader+"\n" {
			t.Errorf("a refused import wrote:\n%.300s", got)
		}
	}
}
