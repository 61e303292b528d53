package store_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// remember gives user a memory with every exported kind of row: extracted
// facts (one changed, so with history), a direct fact, a cleared fact, a
// deleted value,
// context items from scoped and unscoped turns, a direct item, and clears
// of an item, a question and all items. tag makes the texts the user's own.
func remember(t *testing.T, ctx context.Context, s *store.Store, user, tag string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	prov := store.Provenance{Extractor: "llm", Model: "m1", PromptVersion: "v3"}
	_, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: user, ConversationID: "c1", UserMessage: "x", TurnAt: t0, Scope: "app-" + tag},
		{EventID: "e2", UserID: user, ConversationID: "c2", UserMessage: "x", TurnAt: t0.Add(time.Minute)},
		{EventID: "e3", UserID: user, ConversationID: "c3", UserMessage: "x", TurnAt: t0.Add(2 * time.Minute), Scope: "agent <" + tag + ">"},
	})
	must(err)
	fact := func(key, value, event string, at time.Time) store.FactWrite {
		return store.FactWrite{UserID: user, Key: key, Value: value, SourceAt: at, EventID: event, ConversationID: "c-" + event, Provenance: prov}
	}
	_, err = s.UpsertFacts(ctx, []store.FactWrite{fact("city", "Porto "+tag, "e1", t0), fact("car", "Golf", "e1", t0), fact("pet", "Rex & Co", "e1", t0)})
	must(err)
	_, err = s.UpsertFacts(ctx, []store.FactWrite{fact("city", "Lisbon "+tag, "e2", t0.Add(time.Minute))})
	must(err)
	list := func(op store.FactOp, value, event string, at time.Time) store.FactWrite {
		w := fact("allergies", value, event, at)
		w.Op, w.List = op, true
		return w
	}
	_, err = s.UpsertFacts(ctx, []store.FactWrite{list(store.FactAdd, "Peanuts "+tag, "e1", t0), list(store.FactAdd, "soy", "e1", t0)})
	must(err)
	_, err = s.UpsertFacts(ctx, []store.FactWrite{list(store.FactRemove, "soy", "e2", t0.Add(time.Minute))})
	must(err)
	// A value delete of a value no longer current: a tombstone alone.
	gone := fact("city", "PORTO "+tag, "e3", t0.Add(2*time.Minute))
	gone.Op = store.FactDelete
	_, err = s.UpsertFacts(ctx, []store.FactWrite{gone})
	must(err)
	_, _, err = s.SetFact(ctx, user, "name", "N "+tag)
	must(err)
	_, err = s.DeleteFact(ctx, user, "car")
	must(err)
	item := func(q, a, event string, at time.Time) store.ContextWrite {
		return store.ContextWrite{UserID: user, Question: q, Answer: a, CreatedAt: at, EventID: event, ConversationID: "c-" + event, Provenance: prov}
	}
	ids, err := s.InsertContext(ctx, []store.ContextWrite{
		item("Where do I work? "+tag, "At the <harbour>", "e1", t0),
		item("What do I drink?", "Tea "+tag, "e2", t0.Add(time.Minute)),
		item("Which band?", "Low "+tag, "e3", t0.Add(2*time.Minute)),
		item("Old question", "gone by id", "e2", t0.Add(time.Minute)),
		item("Asked twice?", "gone by question", "e2", t0.Add(time.Minute)),
	})
	must(err)
	_, _, err = s.StoreContext(ctx, store.ContextWrite{UserID: user, Question: "Direct " + tag, Answer: "stored", CreatedAt: t0.Add(3 * time.Minute), Provenance: store.Provenance{Extractor: "direct"}})
	must(err)
	_, err = s.DeleteContext(ctx, store.ContextDelete{UserID: user, ID: ids[3]})
	must(err)
	_, err = s.DeleteContext(ctx, store.ContextDelete{UserID: user, Question: "asked  TWICE?"})
	must(err)
}

func export(t *testing.T, ctx context.Context, s *store.Store, user string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.Export(ctx, user, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const header = `{"type":"memoryd.export","version":1}` + "\n"

// TestExportForgetImportIsByteIdentical: export, forget, import and export
// again gives the same bytes, with every line type and scope; the other
// user is untouched and the export names no user.
func TestExportForgetImportIsByteIdentical(t *testing.T) {
	ctx, s := setup(t)
	remember(t, ctx, s, "alice", "a")
	remember(t, ctx, s, "bob", "b")
	first, bob := export(t, ctx, s, "alice"), export(t, ctx, s, "bob")

	for _, want := range []string{`"type":"fact",`, `"type":"fact_history",`, `"type":"fact_clear",`, `"type":"fact_value_clear",`, `"type":"context",`, `"type":"fact_item",`, `"present":false`,
		`"scope":"app-a"`, `"scope":"agent <a>"`, `"op":"clear"`, `"extractor":"direct"`, `"value":"Rex & Co"`} {
		if !bytes.Contains(first, []byte(want)) {
			t.Errorf("export lacks %s:\n%s", want, first)
		}
	}
	if !bytes.HasPrefix(first, []byte(header)) || bytes.Contains(first, []byte("alice")) {
		t.Fatalf("export does not start with the header or names the user:\n%s", first)
	}
	if n := bytes.Count(first, []byte(`"type":"context_clear"`)); n != 3 {
		t.Errorf("%d context clears, want 3 (by id, by question, and the turn of the item cleared by id)", n)
	}

	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if got := export(t, ctx, s, "alice"); string(got) != header {
		t.Fatalf("export after forget = %q, want the header alone", got)
	}
	counts, err := s.Import(ctx, "alice", "alice", bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	if counts["fact"] != 4 || counts["fact_item"] != 2 || counts["context"] != 4 || counts["fact_clear"] != 1 || counts["fact_value_clear"] != 1 || counts["context_clear"] != 3 {
		t.Errorf("import counts = %v", counts)
	}
	if again := export(t, ctx, s, "alice"); !bytes.Equal(again, first) {
		t.Errorf("export after forget and import differs:\n--- first\n%s--- again\n%s", first, again)
	}
	if got := export(t, ctx, s, "bob"); !bytes.Equal(got, bob) {
		t.Errorf("bob's memory changed")
	}
	// The imported memory is live memory: scoped search finds its items.
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"band"}, Scope: "agent <a>"})
	if err != nil || len(c.Matches) != 1 {
		t.Errorf("scoped search after import = %+v, %v", c.Matches, err)
	}
	// The clears came back: an item they cover stays out, and so does a
	// value deleted later than it is stated.
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Asked twice?", Answer: "again", CreatedAt: t0}})
	if err != nil || ids[0] != 0 {
		t.Errorf("an item under an imported clear was inserted: %v, %v", ids, err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "city", Value: "Porto a", SourceAt: t0.Add(90 * time.Second), EventID: "e9"}}); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "alice", "city"); err == nil && f.Value == "Porto a" {
		t.Errorf("a value under an imported value delete was written")
	}
}

// TestImportIsIdempotentAndOwnUser: importing twice is importing once, and
// an import writes the named user only, also with imports of several users
// interleaved.
func TestImportIsIdempotentAndOwnUser(t *testing.T) {
	ctx, s := setup(t)
	users := []string{"u1", "u2", "u3", "u4"}
	files := map[string][]byte{}
	for _, u := range users {
		remember(t, ctx, s, u, u)
		files[u] = export(t, ctx, s, u)
	}
	for _, u := range users {
		if _, _, err := s.ForgetUser(ctx, u, u, store.StreamPosition{}, store.RiverJobs{}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(users))
	for range 2 {
		for _, u := range users {
			wg.Go(func() {
				_, err := s.Import(ctx, u, u, bytes.NewReader(files[u]))
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range users {
		if got := export(t, ctx, s, u); !bytes.Equal(got, files[u]) {
			t.Errorf("%s after two interleaved imports:\n%s\nwant\n%s", u, got, files[u])
		}
	}
	counts, err := s.Import(ctx, "u1", "u1", bytes.NewReader(files["u1"]))
	if err != nil {
		t.Fatal(err)
	}
	for typ, n := range counts {
		if n != 0 {
			t.Errorf("a third import wrote %d %s rows", n, typ)
		}
	}
}

// TestImportMerges: an import merges by the write rules: an older value
// does not replace a newer one, an imported clear deletes older memory, so
// does an imported value delete of its value (and of the values before a
// value it covers), context is deduplicated.
func TestImportMerges(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "alice", Key: "city", Value: "Berlin", SourceAt: t0.Add(time.Hour), EventID: "n1"},
		{UserID: "alice", Key: "car", Value: "Golf", SourceAt: t0, EventID: "n1"},
		{UserID: "alice", Key: "allergies", Value: "dust", SourceAt: t0, EventID: "n1", Op: store.FactAdd, List: true},
		{UserID: "alice", Key: "home", Value: "Berlin", SourceAt: t0, EventID: "n1"},
		{UserID: "alice", Key: "employer", Value: "Acme", SourceAt: t0, EventID: "n1"},
		{UserID: "alice", Key: "team", Value: "Blue", SourceAt: t0, EventID: "n1"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "Tea?", Answer: "Yes", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	in := header +
		`{"type":"fact","key":"city","value":"Porto","source_at":"2026-11-01T10:30:00Z","event_id":"o1","conversation_id":"","extractor":"","model":"","prompt_version":"","updated_at":"2026-11-01T10:30:00Z"}` + "\n" +
		`{"type":"fact_clear","key":"car","cleared_at":"2026-11-01T10:05:00.000000Z"}` + "\n" +
		`{"type":"fact_value_clear","key":"home","item":"berlin","cleared_at":"2026-11-01T10:05:00.000000Z"}` + "\n" +
		`{"type":"fact_value_clear","key":"employer","item":"initech","cleared_at":"2026-11-01T10:10:00.000000Z"}` + "\n" +
		`{"type":"fact","key":"employer","value":"Initech","source_at":"2026-11-01T10:02:00Z","event_id":"o3","conversation_id":"","extractor":"","model":"","prompt_version":"","updated_at":"2026-11-01T10:02:00Z"}` + "\n" +
		`{"type":"fact_value_clear","key":"team","item":"red","cleared_at":"2026-11-01T10:10:00.000000Z"}` + "\n" +
		`{"type":"fact_item","key":"allergies","value":"Peanuts","present":true,"source_at":"2026-11-01T09:00:00Z","event_id":"o2","conversation_id":"","extractor":"","model":"","prompt_version":""}` + "\n" +
		`{"type":"context","question":"TEA?","answer":"yes","created_at":"2026-11-01T09:00:00Z","event_id":"","conversation_id":"","scope":"","extractor":"","model":"","prompt_version":""}` + "\n"
	if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "alice", "city"); err != nil || f.Value != "Berlin" {
		t.Errorf("city = %+v, %v; want the newer Berlin kept", f, err)
	}
	if f, err := s.Fact(ctx, "alice", "allergies"); err != nil || f.Value != "dust, Peanuts" {
		t.Errorf("allergies = %+v, %v; want the union of both lists", f, err)
	}
	if _, err := s.Fact(ctx, "alice", "car"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("car after an imported later clear: %v, want not found", err)
	}
	// Imported value deletes: of the value held, it goes; of a value
	// imported with them, it is not written and the values before it go;
	// of another value, the value held stays.
	for _, key := range []string{"home", "employer"} {
		if f, err := s.Fact(ctx, "alice", key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after an imported value delete: %+v, %v; want not found", key, f, err)
		}
	}
	if f, err := s.Fact(ctx, "alice", "team"); err != nil || f.Value != "Blue" {
		t.Errorf("team = %+v, %v; want Blue kept", f, err)
	}
	if n, err := s.CountContext(ctx, "alice"); err != nil || n != 1 {
		t.Errorf("%d context items, %v; want the pair once", n, err)
	}
}

// TestImportBadInputWritesNothing: a bad line is an *ImportError naming its
// line, and nothing of the input is written, valid lines before it
// included.
func TestImportBadInputWritesNothing(t *testing.T) {
	ctx, s := setup(t)
	good := `{"type":"fact","key":"city","value":"Porto","source_at":"2026-11-01T10:30:00Z","event_id":"","conversation_id":"","extractor":"","model":"","prompt_version":"","updated_at":"2026-11-01T10:30:00Z"}`
	ctxLine := `{"type":"context","question":"Q","answer":"A","created_at":"2026-11-01T09:00:00Z","event_id":"","conversation_id":"","scope":"","extractor":"","model":"","prompt_version":""}`
	for _, c := range []struct {
		name, in string
		line     int
		reason   string
	}{
		{"empty", "", 1, "empty input"},
		{"no header", good + "\n", 1, "not a memoryd export"},
		{"version", `{"type":"memoryd.export","version":2}` + "\n" + good, 1, "version 2 is not supported"},
		{"not json", header + good + "\n{oops\n", 3, "not a JSON object"},
		{"unknown type", header + good + "\n" + `{"type":"turn"}`, 3, `unknown type "turn"`},
		{"unknown field", header + good + "\n" + strings.Replace(good, `"key"`, `"user_id":"bob","key"`, 1), 3, `unknown field "user_id"`},
		{"bad time", header + ctxLine + "\n" + strings.Replace(good, "2026-11-01T10:30:00Z", "yesterday", 1), 3, "source_at"},
		{"blank key", header + strings.Replace(good, `"key":"city"`, `"key":" "`, 1), 2, "key is required"},
		// facts.get and facts.clear trim the key they are given: an
		// imported key with white space at its ends could be neither read
		// nor deleted (only a forget removed it).
		{"spaced key", header + strings.Replace(good, `"key":"city"`, `"key":" city "`, 1), 2, "white space"},
		{"spaced clear key", header + `{"type":"fact_clear","key":"city\t","cleared_at":"2026-11-01T09:00:00Z"}`, 2, "white space"},
		{"NUL", header + ctxLine + "\n" + strings.Replace(ctxLine, `"A"`, `"a\u0000b"`, 1), 3, "NUL"},
		{"long scope", header + strings.Replace(ctxLine, `"scope":""`, `"scope":"`+strings.Repeat("s", 129)+`"`, 1), 2, "scope is 129 bytes"},
		{"future", header + strings.ReplaceAll(good, "2026-11-01T10:30:00Z", "2999-01-01T00:00:00Z"), 2, "in the future"},
		{"bad hash", header + `{"type":"context_clear","hash":"zz","cleared_at":"2026-11-01T09:00:00Z"}`, 2, "hash"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Import(ctx, "alice", "alice", strings.NewReader(c.in))
			var ie *store.ImportError
			if !errors.As(err, &ie) || ie.Line != c.line || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("import error = %v; want line %d: ...%s", err, c.line, c.reason)
			}
			if got := export(t, ctx, s, "alice"); string(got) != header {
				t.Fatalf("a refused import wrote:\n%s", got)
			}
		})
	}
	big := strings.NewReader(strings.Repeat("x", store.MaxImportBytes+1))
	if _, err := s.Import(ctx, "alice", "alice", big); !errors.Is(err, store.ErrImportTooLarge) {
		t.Errorf("import over the limit: %v", err)
	}
}

// TestForgetWaitsForImport: a forget that comes while an import is half
// written waits for it to commit and then deletes all of it: never a half
// import. (A forget that comes first simply precedes the import.)
func TestForgetWaitsForImport(t *testing.T) {
	ctx, s := setup(t)
	remember(t, ctx, s, "alice", "a")
	file := export(t, ctx, s, "alice")
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	halfway, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(resume) }) }
	t.Cleanup(release) // a failure below must not leave the import waiting
	imported := make(chan error, 1)
	go func() {
		_, err := s.Import(store.WithImportHook(ctx, func() {
			close(halfway)
			<-resume
		}), "alice", "alice", bytes.NewReader(file))
		imported <- err
	}()
	<-halfway
	// Readers see nothing of the import in flight.
	if got := export(t, ctx, s, "alice"); string(got) != header {
		t.Fatalf("half an import is visible:\n%s", got)
	}
	forgot := make(chan error, 1)
	go func() {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{})
		forgot <- err
	}()
	eventstest.Eventually(t, "the forget to wait for the import's user lock", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `
			WITH k AS (SELECT hashtextextended('memoryd.user.' || current_schema() || '.alice', 0) AS k)
			SELECT count(*) FROM pg_locks, k WHERE locktype = 'advisory' AND NOT granted
			  AND classid::bigint = (k.k >> 32) & 4294967295 AND objid::bigint = k.k & 4294967295`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0, fmt.Sprintf("%d waiting", n)
	})
	release()
	if err := <-imported; err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	if got := export(t, ctx, s, "alice"); string(got) != header {
		t.Fatalf("after the forget that waited for the import:\n%s", got)
	}
}

// TestScopedReads: with a scope, search and list read that scope's items
// only; without, all of the user's.
func TestScopedReads(t *testing.T) {
	ctx, s := setup(t)
	remember(t, ctx, s, "alice", "a")
	for _, c := range []struct {
		scope string
		want  int
	}{{"", 4}, {"app-a", 1}, {"agent <a>", 1}, {"none", 0}} {
		items, err := s.ListScopedContext(ctx, "alice", c.scope, store.ContextCursor{}, 100)
		if err != nil || len(items) != c.want {
			t.Errorf("list scope %q: %d items, %v; want %d", c.scope, len(items), err, c.want)
		}
		cands, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"work", "drink", "band", "direct"}, Scope: c.scope})
		if err != nil || len(cands.Matches) != c.want || cands.Stats.Items != c.want {
			t.Errorf("search scope %q: %d matches of %d items, %v; want %d", c.scope, len(cands.Matches), cands.Stats.Items, err, c.want)
		}
		for _, m := range cands.Matches {
			if c.scope == "app-a" && !strings.HasPrefix(m.Item.Question, "Where do I work") {
				t.Errorf("scope app-a found %q", m.Item.Question)
			}
		}
	}
	// Paged: the cursor continues within the scope.
	first, err := s.ListScopedContext(ctx, "alice", "app-a", store.ContextCursor{}, 1)
	if err != nil || len(first) != 1 {
		t.Fatal(first, err)
	}
	rest, err := s.ListScopedContext(ctx, "alice", "app-a", store.ContextCursor{CreatedAt: first[0].CreatedAt, ID: first[0].ID}, 10)
	if err != nil || len(rest) != 0 {
		t.Errorf("second page of scope app-a: %v, %v", rest, err)
	}
}

// TestImportTiesAsUpsert: an imported fact that ties with the stored one
// (same source time and turn: a replay with another model) is resolved by
// the store's own order, whichever side was there first, and a direct
// write wins a tie with an extracted one.
func TestImportTiesAsUpsert(t *testing.T) {
	ctx, s := setup(t)
	line := func(value, extractor string) string {
		return header + `{"type":"fact","key":"city","value":"` + value + `","source_at":"2026-11-01T10:00:00Z","event_id":"e1","conversation_id":"","extractor":"` +
			extractor + `","model":"","prompt_version":"","updated_at":"2026-11-01T10:00:00Z"}` + "\n"
	}
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		user, stored, storedBy, imported, importedBy, want string
	}{
		{"u1", "Berlin", "llm", "Munich", "llm", "Munich"},
		{"u2", "Munich", "llm", "Berlin", "llm", "Munich"},
		{"u3", "Munich", "llm", "Berlin", "direct", "Berlin"},
	} {
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: c.user, Key: "city", Value: c.stored, SourceAt: at, EventID: "e1",
			Provenance: store.Provenance{Extractor: c.storedBy}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Import(ctx, c.user, c.user, strings.NewReader(line(c.imported, c.importedBy))); err != nil {
			t.Fatal(err)
		}
		if f, err := s.Fact(ctx, c.user, "city"); err != nil || f.Value != c.want {
			t.Errorf("%s: city = %q, %v; want %q", c.user, f.Value, err, c.want)
		}
	}
}

// TestImportedClearOfAListKey: an imported clear of a list key drops the
// items it covers from the list already there and keeps the later ones.
func TestImportedClearOfAListKey(t *testing.T) {
	ctx, s := setup(t)
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i, v := range []string{"peanuts", "", "shellfish"} {
		if v == "" {
			continue
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "allergies", Value: v, SourceAt: at.Add(time.Duration(i) * time.Hour),
			EventID: fmt.Sprint("e", i), Op: store.FactAdd, List: true}}); err != nil {
			t.Fatal(err)
		}
	}
	in := header + `{"type":"fact_clear","key":"allergies","cleared_at":"2026-11-01T11:00:00.000000Z"}` + "\n"
	if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "alice", "allergies"); err != nil || f.Value != "shellfish" {
		t.Errorf("allergies = %q, %v; want the item stated after the clear alone", f.Value, err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM fact_items WHERE user_id = 'alice'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d items left, %v; want 1", n, err)
	}
}

// TestImportCallsTheContextHook: the items an import inserts reach the
// context hook inside its transaction (with embedding on, their embed jobs
// are inserted there), each once; an item the user already holds, or a
// second import of the same file, calls it with nothing.
func TestImportCallsTheContextHook(t *testing.T) {
	ctx, s := setup(t)
	remember(t, ctx, s, "alice", "a")
	file := export(t, ctx, s, "alice")
	held, err := s.ListContext(ctx, "alice", store.ContextCursor{}, 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatal("remember stored no context item")
	}
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	var seen []store.ContextRef
	s.SetContextHook(func(ctx context.Context, tx pgx.Tx, items []store.ContextRef) error {
		for _, it := range items {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM context WHERE id = $1 AND user_id = $2`, it.ID, it.UserID).Scan(&n); err != nil || n != 1 {
				return fmt.Errorf("item %d of %s not in the hook's transaction: %d %v", it.ID, it.UserID, n, err)
			}
		}
		seen = append(seen, items...)
		return nil
	})
	t.Cleanup(func() { s.SetContextHook(nil) })

	if _, err := s.Import(ctx, "alice", "alice", bytes.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	now, err := s.ListContext(ctx, "alice", store.ContextCursor{}, 200)
	if err != nil {
		t.Fatal(err)
	}
	var want []store.ContextRef
	for _, it := range now {
		want = append(want, store.ContextRef{UserID: "alice", ID: it.ID})
	}
	slices.SortFunc(want, func(a, b store.ContextRef) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortFunc(seen, func(a, b store.ContextRef) int { return cmp.Compare(a.ID, b.ID) })
	if len(now) != len(held) || !slices.Equal(seen, want) {
		t.Fatalf("the import's hook saw %v, want every imported item %v (%d held before the forget)", seen, want, len(held))
	}
	seen = nil
	if _, err := s.Import(ctx, "alice", "alice", bytes.NewReader(file)); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 0 {
		t.Errorf("a second import of the same file called the hook with %v", seen)
	}
}
