package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// legacyHash is the content hash (or, with no answer, the question hash)
// as releases before migration 051 computed it: lowercased, white space
// collapsed, no Unicode normalization.
func legacyHash(user, question string, answer ...string) []byte {
	fold := func(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }
	h := sha256.New()
	h.Write([]byte(user + "\x00" + fold(question)))
	for _, a := range answer {
		h.Write([]byte("\x00" + fold(a)))
	}
	return h.Sum(nil)
}

func TestContentHashUnicodeForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"composed and decomposed accent", "Where is the caf\u00e9?", "Where is the cafe\u0301?", true},
		{"full-width and ASCII", "ＩＫＥＡ opening hours", "IKEA opening hours", true},
		{"ligature", "the \ufb01le I sent", "the file I sent", true},
		{"half-width katakana", "ｽﾀｰﾊﾞｯｸｽ", "スターバックス", true},
		{"no-break space", "new\u00a0york", "New York", true},
		{"other accent", "caf\u00e9", "cafe", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			same := string(store.ContentHash("u", tt.a, "x")) == string(store.ContentHash("u", tt.b, "x"))
			if same != tt.same {
				t.Fatalf("ContentHash(%q) == ContentHash(%q): %v, want %v", tt.a, tt.b, same, tt.same)
			}
		})
	}
}

// storeAt050 returns a store on a schema of the test's own migrated up to
// 050, the version before the Unicode re-hash, its connection string, and
// a quiet logger for the migrations that follow.
func storeAt050(t *testing.T) (*store.Store, string, *slog.Logger) {
	t.Helper()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := s.Migrate(context.Background(), migrationsUpTo(t, "050_~"), quiet); err != nil {
		t.Fatal(err)
	}
	return s, url, quiet
}

// TestMigration051MergesUnicodeTwins: items stored before migration 051
// under the old hash are re-hashed by it; twins that differ only in Unicode
// form become one item (the oldest row, with the latest time, its vector
// and import record following it), each merged row a context.deleted
// change; another user's same text is untouched; and afterwards a new form
// of the text is a duplicate, a clear by question takes every form, and a
// clear recorded before the migration under an old hash still covers its
// form.
func TestMigration051MergesUnicodeTwins(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, quiet := storeAt050(t)
	db := s.Pool()
	const (
		nfd = "Where do I buy Ko\u0308lsch?"
		nfc = "Where do I buy K\u00f6lsch?"
		ans = "At the Brauhaus"
	)
	insert := func(user, q, a string, at time.Time) int64 {
		t.Helper()
		var id int64
		if err := db.QueryRow(ctx, `INSERT INTO context (user_id, question, answer, created_at, content_hash, event_id)
			VALUES ($1, $2, $3, $4, $5, 'ev-' || $1 || md5($2)) RETURNING id`, user, q, a, at, legacyHash(user, q, a)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	keep := insert("alice", nfd, ans, t0)                                  // oldest: stays
	twin := insert("alice", nfc, ans, t0.Add(time.Hour))                   // merged into keep
	wide := insert("alice", "ＩＫＥＡ hours?", "Ten to nine", t0)              // moves alone
	bobs := insert("bob", nfd, ans, t0)                                    // another user's
	bobsTwin := insert("bob", "Where do I buy Kölsch?", "At the café", t0) // the same question, another answer
	if _, err := db.Exec(ctx, `INSERT INTO context_embeddings (context_id, model, user_id, content_hash, dims, vector)
		SELECT id, 'm', user_id, content_hash, 1, '\x0000803f' FROM context WHERE id = $1`, keep); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO import_sources (user_id, event_id, content) VALUES ('alice', 'imp-1', 'c:' || encode($1::bytea, 'hex'))`,
		legacyHash("alice", nfd, ans)); err != nil {
		t.Fatal(err)
	}
	// A clear by question recorded by the old release, of a decomposed form.
	const clearedNFD = "what is my cafe\u0301 order?"
	if _, err := db.Exec(ctx, `INSERT INTO context_clears (user_id, hash, cleared_at, own_at) VALUES ('alice', $1, $2, $2)`,
		legacyHash("alice", clearedNFD), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// A list whose item was stated in two forms (two items before 051), and
	// a value delete of a full-width value beside one of its ASCII form.
	at, later := t0, t0.Add(time.Hour)
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO fact_items (user_id, key, item, value, present, source_at, event_id) VALUES
			('alice', 'allergies', 'peanuts', 'Peanuts', true, $1, 'e1'),
			('alice', 'allergies', 'ｐｅａｎｕｔｓ', 'ｐｅａｎｕｔｓ', true, $2, 'e2'),
			('alice', 'allergies', 'shellfish', 'shellfish', true, $1, 'e1')`, []any{at, later}},
		{`INSERT INTO facts (user_id, key, value, source_at, event_id) VALUES ('alice', 'allergies', 'Peanuts, shellfish, ｐｅａｎｕｔｓ', $1, 'e2')`, []any{later}},
		{`INSERT INTO fact_value_clears (user_id, key, item, cleared_at) VALUES ('alice', 'city', 'ｂｅｒｌｉｎ', $2), ('alice', 'city', 'berlin', $1)`, []any{at, later}},
		{`INSERT INTO import_sources (user_id, event_id, content) VALUES ('alice', 'e2', 'i:allergies:ｐｅａｎｕｔｓ')`, nil},
	} {
		if _, err := db.Exec(ctx, st.sql, st.args...); err != nil {
			t.Fatal(err)
		}
	}
	var changesBefore int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM memory_changes WHERE payload->>'type' = 'context.deleted'`).Scan(&changesBefore); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Migrate(ctx, migrations.FS, quiet); err != nil {
		t.Fatal(err)
	}

	type row struct {
		hash []byte
		at   time.Time
	}
	rows := map[int64]row{}
	r, err := db.Query(ctx, `SELECT id, content_hash, created_at FROM context`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var id int64
		var x row
		if err := r.Scan(&id, &x.hash, &x.at); err != nil {
			t.Fatal(err)
		}
		rows[id] = x
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if _, ok := rows[twin]; ok || len(rows) != 4 {
		t.Fatalf("after 051: rows %v; want the twin %d merged, 4 left", rows, twin)
	}
	want := map[int64][]byte{
		keep: store.ContentHash("alice", nfc, ans), wide: store.ContentHash("alice", "IKEA hours?", "Ten to nine"),
		bobs: store.ContentHash("bob", nfc, ans), bobsTwin: store.ContentHash("bob", "Where do I buy Kölsch?", "At the café"),
	}
	for id, h := range want {
		if string(rows[id].hash) != string(h) {
			t.Errorf("item %d: hash %x, want %x", id, rows[id].hash, h)
		}
	}
	if !rows[keep].at.Equal(t0.Add(time.Hour)) {
		t.Errorf("kept item's time %v, want the twin's later %v", rows[keep].at, t0.Add(time.Hour))
	}
	var fresh bool
	if err := db.QueryRow(ctx, `SELECT e.content_hash = c.content_hash FROM context_embeddings e JOIN context c ON c.id = e.context_id WHERE c.id = $1`, keep).Scan(&fresh); err != nil || !fresh {
		t.Errorf("kept item's vector follows its hash: %v, %v", fresh, err)
	}
	var source string
	if err := db.QueryRow(ctx, `SELECT content FROM import_sources WHERE user_id = 'alice' AND event_id = 'imp-1'`).Scan(&source); err != nil || source != "c:"+hex.EncodeToString(rows[keep].hash) {
		t.Errorf("import record %q (%v), want c:%x", source, err, rows[keep].hash)
	}
	var deleted []int64
	if err := db.QueryRow(ctx, `SELECT coalesce(array_agg((payload->>'id')::bigint), '{}') FROM memory_changes WHERE payload->>'type' = 'context.deleted'`).Scan(&deleted); err != nil {
		t.Fatal(err)
	}
	if changesBefore != 0 || len(deleted) != 1 || deleted[0] != twin {
		t.Errorf("context.deleted changes %v (before %d), want one of %d", deleted, changesBefore, twin)
	}

	var items []string
	if err := db.QueryRow(ctx, `SELECT array_agg(item || '=' || value || '@' || event_id ORDER BY item) FROM fact_items WHERE user_id = 'alice'`).Scan(&items); err != nil {
		t.Fatal(err)
	}
	if want := []string{"peanuts=ｐｅａｎｕｔｓ@e2", "shellfish=shellfish@e1"}; !slices.Equal(items, want) {
		t.Errorf("list items after 051: %q, want %q (the later statement of the two forms)", items, want)
	}
	facts, err := s.Facts(ctx, "alice", 10)
	if err != nil || len(facts) != 1 || facts[0].Value != "ｐｅａｎｕｔｓ, shellfish" {
		t.Errorf("alice's facts after 051: %+v (%v), want allergies listing each item once", facts, err)
	}
	var clears []string
	if err := db.QueryRow(ctx, `SELECT array_agg(item || '@' || to_char(cleared_at AT TIME ZONE 'UTC', 'HH24:MI') ORDER BY item) FROM fact_value_clears WHERE user_id = 'alice'`).Scan(&clears); err != nil {
		t.Fatal(err)
	}
	if want := []string{"berlin@11:00"}; !slices.Equal(clears, want) {
		t.Errorf("value deletes after 051: %q, want %q (the later of the two forms)", clears, want)
	}
	if err := db.QueryRow(ctx, `SELECT content FROM import_sources WHERE user_id = 'alice' AND event_id = 'e2'`).Scan(&source); err != nil || source != "i:allergies:peanuts" {
		t.Errorf("import record of the list item %q (%v), want i:allergies:peanuts", source, err)
	}
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "allergies", Value: "PEANUTS", Op: store.FactRemove, List: true, SourceAt: t0.Add(2 * time.Hour), EventID: "e3"}}); err != nil {
		t.Fatal(err)
	}
	if facts, err := s.Facts(ctx, "alice", 10); err != nil || len(facts) != 1 || facts[0].Value != "shellfish" {
		t.Errorf("alice's allergies after removing PEANUTS: %+v (%v), want shellfish", facts, err)
	}

	// The forms are one item now, and a clear by question takes every form.
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: "where do i buy ko\u0308lsch?", Answer: "AT THE BRAUHAUS", CreatedAt: t0.Add(3 * time.Hour)}})
	if err != nil || ids[0] != 0 {
		t.Fatalf("a third form after 051: ids %v, %v; want a duplicate (0)", ids, err)
	}
	n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "bob", Question: nfc})
	if err != nil || n != 2 {
		t.Fatalf("bob's clear of %q deleted %d (%v), want both forms' items (2)", nfc, n, err)
	}
	if n, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", Question: "ikea HOURS?"}); err != nil || n != 1 {
		t.Fatalf("alice's clear of the ASCII form of a full-width question deleted %d (%v), want 1", n, err)
	}
	// The old release's clear of the decomposed question still covers it.
	ids, err = s.InsertContext(ctx, []store.ContextWrite{
		{UserID: "alice", Question: clearedNFD, Answer: "flat white", CreatedAt: t0.Add(time.Hour)},
		{UserID: "alice", Question: clearedNFD, Answer: "oat latte", CreatedAt: t0.Add(3 * time.Hour)},
	})
	if err != nil || ids[0] != 0 || ids[1] == 0 {
		t.Fatalf("items of a question cleared before 051: ids %v, %v; want the earlier cleared (0), the later stored", ids, err)
	}
}

// TestImportOfAnExportBefore051: an export written before migration 051
// holds value deletes by identities without NFKC and clears by hashes of
// text without NFKC; imported now, they still cover the values and items
// they named.
func TestImportOfAnExportBefore051(t *testing.T) {
	ctx, s := setup(t)
	const cafe = "Which cafe\u0301 do I like?"
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "home", Value: "ＢＥＲＬＩＮ", SourceAt: t0, EventID: "n1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: cafe, Answer: "Blue Bottle", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	in := header +
		`{"type":"fact_value_clear","key":"home","item":"ｂｅｒｌｉｎ","cleared_at":"2026-11-01T10:05:00.000000Z"}` + "\n" +
		`{"type":"context_clear","hash":"` + hex.EncodeToString(legacyHash("alice", cafe)) + `","cleared_at":"2026-11-01T10:05:00.000000Z"}` + "\n"
	if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if f, err := s.Fact(ctx, "alice", "home"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("home after an imported delete of its full-width value: %+v, %v; want not found", f, err)
	}
	if n, err := s.CountContext(ctx, "alice"); err != nil || n != 0 {
		t.Errorf("%d context items (%v) after an imported clear of their question's old hash, want 0", n, err)
	}
	ids, err := s.InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: cafe, Answer: "Ritual", CreatedAt: t0}})
	if err != nil || ids[0] != 0 {
		t.Errorf("an item of the cleared question stated before the clear: ids %v, %v; want it not stored", ids, err)
	}
}

// TestImportTakesWhatAnEarlierIngestStored: a turn stamped
// "1970-01-01T00:00:00+01:00" was taken before years were checked in UTC
// and stored as 1969-12-31T23:00Z; an export holding it imports. A day
// earlier is out of range.
func TestImportTakesWhatAnEarlierIngestStored(t *testing.T) {
	ctx, s := setup(t)
	line := func(at string) string {
		return header + `{"type":"context","question":"Q","answer":"A","created_at":"` + at + `","event_id":"","conversation_id":"","scope":"","extractor":"","model":"","prompt_version":""}` + "\n"
	}
	if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(line("1969-12-31T23:00:00Z"))); err != nil {
		t.Fatalf("import of an item an earlier release stored at 1969-12-31T23:00Z: %v", err)
	}
	if _, err := s.Import(ctx, "alice", "alice", strings.NewReader(line("1969-12-30T23:00:00Z"))); err == nil || !strings.Contains(err.Error(), "year 1969 is out of range") {
		t.Fatalf("import of 1969-12-30: %v, want year 1969 out of range", err)
	}
}
