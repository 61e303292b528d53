package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

const (
	thaiRice = "ฉันชอบกินข้าวผัดกุ้ง"       // "I like shrimp fried rice"
	laoRice  = "ຂ້ອຍມັກກິນເຂົ້າໜຽວ"         // "I like sticky rice"
	khmerJob = "ខ្ញុំធ្វើការនៅធនាគារ"       // "I work at a bank"
	burmese  = "ကျွန်တော်မန္တလေးကိုသွားမယ်" // "I will go to Mandalay"
)

// TestSearchSouthEastAsian: Thai, Lao, Khmer and Myanmar runs are indexed
// as bigrams of letters with their marks (migration 048), so a word inside
// a sentence finds it, as a phrase of its bigrams; a word that is not in
// the sentence in that order does not.
func TestSearchSouthEastAsian(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: thaiRice, Answer: "อร่อย", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: laoRice, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: khmerJob, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: burmese, Answer: "", CreatedAt: t0},
	)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"ข้าวผัด", []string{thaiRice}},     // fried rice
		{"กุ้ง", []string{thaiRice}},        // shrimp: two units, one bigram
		{"ผัดข้าว", nil},                    // the same units in another order
		{"อร่อย", []string{thaiRice}},       // the answer half
		{"ເຂົ້າໜຽວ", []string{laoRice}},     // sticky rice
		{"ធនាគារ", []string{khmerJob}},      // bank
		{"မန္တလေး", []string{burmese}},      // Mandalay
		{"ข้าวผัดกุ้ง", []string{thaiRice}}, // a longer phrase
	})
}

// TestMigration048ReindexesSouthEastAsian: items and chunks indexed before
// migration 048 (a Thai sentence one lexeme) get their bigram vectors,
// lengths and term rows when it runs; other items are not touched (no
// update, no memory change).
func TestMigration048ReindexesSouthEastAsian(t *testing.T) {
	ctx, s := setup(t)
	const other = "東京でReactを勉強 and a latin café"
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: thaiRice, Answer: "อร่อย", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: other, Answer: "Nice", CreatedAt: t0},
	)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "c", DocID: "d", Content: "# เมนู\n\nร้านนี้มีข้าวผัดกุ้งอร่อยที่สุด\n"})
	// Index as before 048: the Thai text unsplit (the old memoryd_cjk left
	// text without CJK as it was), the item's and the chunk's.
	plantVectors(t, ctx, s, "%s", thaiRice)
	if _, err := s.Pool().Exec(ctx, `UPDATE doc_chunks SET
		search = setweight(to_tsvector(ts_config::regconfig, heading), 'A') || setweight(to_tsvector(ts_config::regconfig, text), 'B'),
		heading_len = length(to_tsvector(ts_config::regconfig, heading)), text_len = length(to_tsvector(ts_config::regconfig, text))`); err != nil {
		t.Fatal(err)
	}

	if got := matched(t, ctx, s, "alice", "ข้าวผัด"); got != nil {
		t.Fatalf("old vector found by a word inside it: %q (the plant did not work)", got)
	}
	if got := chunkHits(t, ctx, s, "ข้าวผัด"); got != 0 {
		t.Fatalf("old chunk vector found by a word inside it: %d hits (the plant did not work)", got)
	}
	reindexAgain(t, ctx, s, "048_sea_scripts.sql", other)
	if got := matched(t, ctx, s, "alice", "ข้าวผัด"); !slices.Equal(got, []string{thaiRice}) {
		t.Fatalf("after 048, ข้าวผัด found %q", got)
	}
	if got := chunkHits(t, ctx, s, "ข้าวผัด"); got != 1 {
		t.Fatalf("after 048, ข้าวผัด found %d chunks, want 1", got)
	}
}

// chunkHits counts alice's chunks a keyword finds.
func chunkHits(t *testing.T, ctx context.Context, s *store.Store, keyword string) int {
	t.Helper()
	return len(search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{keyword}}).Matches)
}

// TestMigration048CatchesWritesDuringIt: a process of the previous release
// inserts a Thai item while migration 048 runs, after its re-index read
// the table: the insert uses the old function (the new one is not visible
// before the migration commits), and the migration, which then waits for
// it, indexes that item again; an insert after that point waits for the
// commit and uses the new function. Before, such items stayed unsearchable
// (an upgrade walk: 12 to 31 of them).
func TestMigration048CatchesWritesDuringIt(t *testing.T) {
	ctx, s := setup(t)
	body, err := migrations.FS.ReadFile("048_sea_scripts.sql")
	if err != nil {
		t.Fatal(err)
	}
	lock := strings.Index(string(body), "LOCK TABLE")
	if lock < 0 {
		t.Fatal("048 takes no lock")
	}
	// Back to the function before 048, as the database was.
	if _, err := s.Pool().Exec(ctx, `CREATE OR REPLACE FUNCTION memoryd_cjk(t text) RETURNS text
		LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT t $$`); err != nil {
		t.Fatal(err)
	}
	migration, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer migration.Rollback(ctx)
	if _, err := migration.Exec(ctx, string(body[:lock])); err != nil {
		t.Fatal(err)
	}
	// The old process's insert, in flight when the migration reaches its lock.
	old, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := s.WithTx(old).InsertContext(ctx, []store.ContextWrite{{UserID: "alice", Question: thaiRice, Answer: "", CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	rest := make(chan error, 1)
	go func() {
		_, err := migration.Exec(ctx, string(body[lock:]))
		rest <- err
	}()
	eventstest.Eventually(t, "the migration to wait for the insert in flight", 30*time.Second, func() (bool, string) {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE relation = 'context'::regclass AND mode = 'ShareLock' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0, "no share lock waiting"
	})
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-rest; err != nil {
		t.Fatal(err)
	}
	if err := migration.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := matched(t, ctx, s, "alice", "ข้าวผัด"); !slices.Equal(got, []string{thaiRice}) {
		t.Fatalf("the item an old process inserted during 048: ข้าวผัด found %q", got)
	}
}
