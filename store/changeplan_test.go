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

// TestChangeNumberingKeepsToThePrimaryKeyAsTheOutboxGrows: a plan the
// numbering kept from the session's first commit, made for a drained
// outbox analyzed empty where a sequential scan is cheapest, would read
// the whole outbox at every commit once it fills (a publisher that is
// down): a first version of migration 071 forced generic plans and did.
// Every commit reads its changes through the primary key.
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
