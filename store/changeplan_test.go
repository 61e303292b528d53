package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store/storetest"
)

// TestChangeNumberingReadsOnlyItsRange: the deferred trigger that numbers
// a commit's changes finds them through the primary key's id range, never
// through memory_changes_user_seq_idx's "seq IS NULL" entries. Every
// numbered (and later published and deleted) change leaves such an entry
// behind until a vacuum, so that plan read all of them at every commit: on
// membench's 500,000-item corpus, with autovacuum off, 520,000 entries and
// 47 ms of CPU a commit, most of Postgres' time while it ingested. A
// long-lived connection runs the trigger's statement with a generic plan,
// which is where the planner chose it; the test forces that plan and reads
// the trigger's plans through auto_explain. Nor is the numbering compiled
// by JIT (5 ms a commit where stale statistics made its estimate large).
func TestChangeNumberingReadsOnlyItsRange(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	ctx := context.Background()
	// The outbox's history: changes numbered, then published (deleted),
	// not vacuumed.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memory_changes (user_id, payload)
		SELECT 'u' || (i % 50), jsonb_build_object('type', 'fact.set', 'value', repeat(md5(i::text), 40)) FROM generate_series(1, 30000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM memory_changes`); err != nil {
		t.Fatal(err)
	}

	conn, plans := explainConn(t, url,
		"SET auto_explain.log_nested_statements = on",
		"SET plan_cache_mode = force_generic_plan",
		"SET jit_above_cost = 0", // JIT for every statement that does not turn it off
	)
	for i := range 3 {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO memory_changes (user_id, payload) VALUES ($1, '{"type":"fact.set"}')`, []string{"alice", "bob", "carol"}[i])
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	numbering := 0
	noticed := plans()
	for _, p := range noticed {
		if !strings.Contains(p, "GROUP BY user_id") {
			continue
		}
		numbering++
		if strings.Contains(p, "memory_changes_user_seq_idx") {
			t.Errorf("the numbering read the unnumbered entries of memory_changes_user_seq_idx:\n%s", p)
		}
		if strings.Contains(p, "JIT:") {
			t.Errorf("the numbering was compiled (JIT), at every commit:\n%s", p)
		}
	}
	if numbering == 0 {
		t.Fatalf("no plan of the numbering statement among %d notices", len(noticed))
	}
	var unnumbered int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM memory_changes WHERE seq IS NULL`).Scan(&unnumbered); err != nil || unnumbered != 0 {
		t.Fatalf("%d changes left unnumbered (%v)", unnumbered, err)
	}
}

// TestChangeNumberingIsNotPlannedAtEveryCommit: the deferred trigger that
// numbers a commit's changes runs its statements with the plans its
// session keeps (migration 071). Its UPDATE of the changes, whose ids are
// an array parameter, was planned again at every commit that recorded a
// change: a custom plan knows the array's length (1 row, where a generic
// plan guesses more), so Postgres never settled on the generic one, and
// planning it was 3% of a backend's CPU storing one item a transaction.
// The trigger's plans are read through auto_explain: a generic plan shows
// the parameter, a custom one its value.
func TestChangeNumberingIsNotPlannedAtEveryCommit(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	storetest.Open(t, url)
	ctx := context.Background()
	conn, plans := explainConn(t, url, "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_verbose = on")
	// Past Postgres' five custom plans before it weighs a generic one.
	for range 8 {
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO memory_changes (user_id, payload) VALUES ('alice', '{"type":"fact.set"}')`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var last string
	for _, p := range plans() {
		if strings.Contains(p, "UPDATE memory_changes c SET seq") {
			last = p
		}
	}
	if last == "" {
		t.Fatal("no plan of the numbering's UPDATE")
	}
	if !strings.Contains(last, "Function Call: unnest($") {
		t.Errorf("the numbering's UPDATE was planned for its ids at the 8th commit:\n%s", last)
	}
}

// TestChangeNumberingKeepsToThePrimaryKeyAsTheOutboxGrows: the generic
// plans the numbering keeps (migration 071) were made for the outbox as
// it was when the session first committed a change, often drained and
// analyzed empty, where a sequential scan is cheapest. When the outbox
// then fills (a publisher that is down), every commit still reads its
// changes through the primary key, not the whole outbox.
func TestChangeNumberingKeepsToThePrimaryKeyAsTheOutboxGrows(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	s := storetest.Open(t, url)
	ctx := context.Background()
	if _, err := s.Pool().Exec(ctx, `ANALYZE memory_changes`); err != nil {
		t.Fatal(err)
	}
	conn, plans := explainConn(t, url, "SET auto_explain.log_nested_statements = on")
	commit := func() {
		t.Helper()
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO memory_changes (user_id, payload) VALUES ('alice', '{"type":"fact.set"}')`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	commit()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memory_changes (user_id, payload)
		SELECT 'u' || (i % 50), '{"type":"fact.set"}' FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	before := len(plans())
	commit()
	for _, p := range plans()[before:] {
		if (strings.Contains(p, "UPDATE memory_changes c SET seq") || strings.Contains(p, "GROUP BY user_id") || strings.Contains(p, "SELECT seq FROM memory_changes")) &&
			(strings.Contains(p, "Seq Scan on") || strings.Contains(p, "Hash Join") || strings.Contains(p, "Merge Join") || !strings.Contains(p, "Index Cond")) {
			t.Errorf("the numbering read the whole outbox of 20,000 changes at a commit:\n%s", p)
		}
	}
}
