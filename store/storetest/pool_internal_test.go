package storetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// poolReport is one gaveBack call.
type poolReport struct{ name, idle, reason string }

// setupPool fails unless schemas are reused here (reuse off by the
// environment skips), and returns the reports of the schemas given back
// while the test runs, by name.
func setupPool(t *testing.T) func(name string) poolReport {
	t.Helper()
	if !pooledOn(context.Background()) {
		if os.Getenv("MEMORYD_TEST_FRESH_SCHEMAS") == "1" {
			t.Skip("schema reuse is off: MEMORYD_TEST_FRESH_SCHEMAS=1")
		}
		t.Fatalf("schema reuse is off: %s", poolSetup.why)
	}
	var mu sync.Mutex
	reports := map[string]poolReport{}
	prev := gaveBack
	gaveBack = func(name, idle, reason string) {
		mu.Lock()
		defer mu.Unlock()
		reports[name] = poolReport{name, idle, reason}
	}
	t.Cleanup(func() { gaveBack = prev })
	return func(name string) poolReport {
		mu.Lock()
		defer mu.Unlock()
		r, ok := reports[name]
		if !ok {
			t.Fatalf("schema %s was not given back", name)
		}
		return r
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func currentSchema(t *testing.T, s *store.Store) string {
	t.Helper()
	var name string
	if err := s.Pool().QueryRow(context.Background(), `SELECT current_schema()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// state is what a test can see of a schema: each table's rows (less the
// times a migration wrote) and heap size, sequences, planner statistics.
func state(t *testing.T, conn *pgx.Conn, schema string) map[string]string {
	t.Helper()
	ctx := context.Background()
	tables, sequences, err := relations(ctx, conn, schema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	files, _, err := contents(ctx, conn, schema, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	for table, ts := range files {
		out["files and planner "+table] = fmt.Sprintf("%+v", ts)
	}
	for _, table := range tables {
		var rows string
		var size int64
		q := pgx.Identifier{schema, table}.Sanitize()
		if err := conn.QueryRow(ctx, `SELECT coalesce(jsonb_agg(to_jsonb(t) - 'applied_at' - 'created_at' ORDER BY to_jsonb(t)::text)::text, '[]'),
			(pg_stat_file(pg_relation_filepath($1::regclass))).size FROM `+q+` t`, q).Scan(&rows, &size); err != nil {
			t.Fatal(err)
		}
		var live, dead, inserted int64
		if err := conn.QueryRow(ctx, `SELECT pg_stat_get_live_tuples($1::regclass), pg_stat_get_dead_tuples($1::regclass),
			pg_stat_get_tuples_inserted($1::regclass)`, q).Scan(&live, &dead, &inserted); err != nil {
			t.Fatal(err)
		}
		if rows != "[]" {
			// The migrations' own rows, counted as their sessions flushed.
			live, dead, inserted = 0, 0, 0
		}
		out["table "+table] = fmt.Sprintf("%d bytes, %d live, %d dead, %d inserted: %s", size, live, dead, inserted, rows)
	}
	for _, seq := range sequences {
		var last *int64
		if err := conn.QueryRow(ctx, `SELECT pg_sequence_last_value($1::regclass)`, pgx.Identifier{schema, seq}.Sanitize()).Scan(&last); err != nil {
			t.Fatal(err)
		}
		out["sequence "+seq] = fmt.Sprint(last)
	}
	var stats int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_statistic s JOIN pg_class c ON c.oid = s.starelid WHERE c.relnamespace = to_regnamespace($1)`,
		schema).Scan(&stats); err != nil {
		t.Fatal(err)
	}
	out["statistics"] = strconv.Itoa(stats)
	return out
}

// TestReusedSchemaIsAsNew: a schema a test wrote to in every way a test
// does (rows through the store, rows inserted and deleted, an updated
// seeded row, sequences, ANALYZE) is given back holding what a freshly
// migrated schema holds, and a connection the test left open can no longer
// reach it.
func TestReusedSchemaIsAsNew(t *testing.T) {
	report := setupPool(t)
	ctx := context.Background()
	// A fingerprint of this test's own: no other test process claims the
	// schema given back before it is inspected.
	fp := poolSetup.fp
	poolSetup.fp = "own" + randomHex(4)
	t.Cleanup(func() { poolSetup.fp = fp })
	var name string
	var left *pgx.Conn
	t.Run("writer", func(t *testing.T) {
		s := New(t)
		name = currentSchema(t, s)
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "ann", UserMessage: "I live in Paris", TurnAt: at}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "ann", Key: "location", Value: "Paris", SourceAt: at, EventID: "e1",
			Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.StoreContext(ctx, store.ContextWrite{UserID: "ann", Question: "I live in Paris", Answer: "ok", EventID: "e1", CreatedAt: at,
			Provenance: store.Provenance{Extractor: "rules"}}); err != nil {
			t.Fatal(err)
		}
		for _, sql := range []string{
			`UPDATE prune_state SET context_high_water = 42, last_run_at = now()`,
			`ANALYZE turns, context, facts, documents`, // documents: empty, never written
			// Written, deleted and vacuumed: the heap may be as before,
			// not its indexes (VACUUM keeps what other sessions may see, so
			// the heap's end is not always cut here).
			`INSERT INTO tombstones (user_token, stream_seq) SELECT 't' || i, i FROM generate_series(1, 2000) i`,
			`DELETE FROM tombstones`,
			`VACUUM tombstones`,
		} {
			if _, err := s.Pool().Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		// Left open past the test, as a leaked connection would be.
		var err error
		if left, err = pgx.Connect(ctx, schemaURL(name)); err != nil {
			t.Fatal(err)
		}
	})
	defer left.Close(ctx)
	r := report(name)
	if r.reason != "" || r.idle == "" {
		t.Fatalf("schema %s given back as %+v, want idle", name, r)
	}
	conn := connect(t, BaseURL())
	t.Cleanup(func() { _ = dropSchema(ctx, conn, r.idle) }) // of its own fingerprint: no test claims it
	_, freshURL := Schema(t)
	fresh := Open(t, freshURL)
	want := state(t, conn, currentSchema(t, fresh))
	got := state(t, conn, r.idle)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: reused %s, fresh %s", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reused schema has %d tables and sequences, fresh %d", len(got), len(want))
	}
	if _, err := left.Exec(ctx, `INSERT INTO tombstones (user_token, stream_seq) VALUES ('late', 2)`); err == nil {
		t.Error("a connection left open by the test still writes to its schema after it was given back")
	}
}

// TestChangedSchemaIsDropped: a schema whose DDL its test changed is
// dropped, not reused.
func TestChangedSchemaIsDropped(t *testing.T) {
	report := setupPool(t)
	conn := connect(t, BaseURL())
	for _, ddl := range []string{
		`ALTER TABLE turns ADD COLUMN extra int`,
		`CREATE INDEX ON context (created_at)`,
		`ALTER TABLE context DISABLE TRIGGER ALL`,
		`COMMENT ON TABLE facts IS 'changed'`,
		`CREATE INDEX briefly ON context (created_at); DROP INDEX briefly`, // the same tables after, yet DDL
		`GRANT SELECT ON turns TO PUBLIC`,                                  // names no schema in the log
		// A migration's function or trigger changed (a test's own are
		// dropped: TestSchemaWithTestTriggersIsReused).
		`CREATE OR REPLACE FUNCTION memoryd_cjk(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT t $$`,
		`DROP TRIGGER context_tsvector_trg ON context`,
		`ALTER FUNCTION memoryd_cjk(text) SET jit = off`,
		`CREATE FUNCTION test_noted() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$; COMMENT ON FUNCTION test_noted() IS 'noted'`,
	} {
		var name string
		t.Run(ddl, func(t *testing.T) {
			s := New(t)
			name = currentSchema(t, s)
			if _, err := s.Pool().Exec(context.Background(), ddl); err != nil {
				t.Fatal(err)
			}
		})
		if r := report(name); r.reason != "its DDL changed" {
			t.Errorf("%s: given back as %+v, want dropped for its DDL", ddl, r)
		}
		var exists bool
		if err := conn.QueryRow(context.Background(), `SELECT to_regnamespace($1) IS NOT NULL`, name).Scan(&exists); err != nil || exists {
			t.Errorf("%s: schema %s exists: %v, %v", ddl, name, exists, err)
		}
	}
}

// TestSchemaWithTestTriggersIsReused: a schema whose test only added
// functions and triggers of its own (a statement held on a lock by a
// trigger, a write made to fail), kept or dropped, is given back as new,
// with them dropped, instead of being dropped and another migrated (some
// 0.4 s of Postgres CPU each, 28 of store's tests a run); and a trigger
// made alone on a migration's function is not kept for the next test. A
// migration's function or trigger changed is still dropped
// (TestChangedSchemaIsDropped).
func TestSchemaWithTestTriggersIsReused(t *testing.T) {
	report := setupPool(t)
	ctx := context.Background()
	// A fingerprint of this test's own: no other test process claims the
	// schemas given back before they are inspected.
	fp := poolSetup.fp
	poolSetup.fp = "own" + randomHex(4)
	t.Cleanup(func() { poolSetup.fp = fp })
	conn := connect(t, BaseURL())
	_, freshURL := Schema(t)
	fresh := currentSchema(t, Open(t, freshURL))
	want := state(t, conn, fresh)
	for k, v := range catalogRoutines(t, conn, fresh) {
		want[k] = v
	}
	// The migrations' functions and triggers as another schema holds them.
	routinesRef.Lock()
	prevRef := routinesRef.m
	routinesRef.m = nil
	routinesRef.Unlock()
	t.Cleanup(func() { routinesRef.Lock(); routinesRef.m = prevRef; routinesRef.Unlock() })
	noteRoutines(ctx, conn, fresh)
	for _, c := range []struct {
		name string
		ddl  []string
	}{{
		name: "own functions and triggers",
		ddl: []string{
			// As store's holdStatements, on a table of no trigger.
			`CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
			`CREATE TRIGGER test_hold AFTER INSERT ON context_clears FOR EACH STATEMENT EXECUTE FUNCTION test_hold()`,
			// As worker's disk_full, beside the migrations' triggers.
			`CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$`,
			`CREATE TRIGGER disk_full BEFORE INSERT ON facts FOR EACH ROW EXECUTE FUNCTION disk_full()`,
			// Made and dropped by the test.
			`CREATE FUNCTION test_gone() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$`,
			`DROP FUNCTION test_gone()`,
			`INSERT INTO tombstones (user_token, stream_seq) VALUES ('t', 1)`,
		},
	}, {
		name: "a trigger alone on a migration's function",
		ddl:  []string{`CREATE TRIGGER test_history AFTER DELETE ON facts FOR EACH ROW EXECUTE FUNCTION memoryd_fact_history()`},
	}} {
		var name string
		t.Run(c.name, func(t *testing.T) {
			s := New(t)
			name = currentSchema(t, s)
			for _, sql := range c.ddl {
				if _, err := s.Pool().Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
		})
		r := report(name)
		if r.reason != "" || r.idle == "" {
			t.Fatalf("%s: schema %s given back as %+v, want idle (its test's own functions and triggers dropped)", c.name, name, r)
		}
		t.Cleanup(func() { _ = dropSchema(ctx, conn, r.idle) }) // of its own fingerprint: no test claims it
		got := state(t, conn, r.idle)
		for k, v := range catalogRoutines(t, conn, r.idle) {
			got[k] = v
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s: reused %q, fresh %q", c.name, k, got[k], w)
			}
		}
		for k, g := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: %s: reused %q, not in a fresh schema", c.name, k, g)
			}
		}
	}
}

// catalogRoutines is what a schema holds of functions and triggers, and which of
// its tables say they have triggers, its name left out.
func catalogRoutines(t *testing.T, conn *pgx.Conn, schema string) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')', md5(p.prosrc) || ' ' || coalesce(array_to_string(p.proconfig, ','), '')
		FROM pg_proc p WHERE p.pronamespace = to_regnamespace($1)
		UNION ALL
		SELECT 'trigger ' || c.relname || ' ' || t.tgname, t.tgfoid::regproc::text || ' ' || t.tgtype || ' ' || t.tgenabled::text
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = to_regnamespace($1) AND NOT t.tgisinternal
		UNION ALL
		-- Named by OID: counted.
		SELECT 'foreign key triggers ' || c.relname, count(*)::text
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE c.relnamespace = to_regnamespace($1) AND t.tgisinternal GROUP BY c.relname
		UNION ALL
		SELECT 'relhastriggers ' || c.relname, c.relhastriggers::text FROM pg_class c WHERE c.relnamespace = to_regnamespace($1)`, schema)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var k, v string
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error {
		out[strings.ReplaceAll(k, schema+".", "")] = strings.ReplaceAll(v, schema+".", "")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOwnSchemaIsClaimedAsGivenBack: a schema this process gave back is
// claimed again with what its give-back found it to hold, as new, without
// reading its files, rows and planner figures again (two of a claim's
// three reads of them, some 5 ms of Postgres CPU a test); and it is given
// back as new again.
func TestOwnSchemaIsClaimedAsGivenBack(t *testing.T) {
	report := setupPool(t)
	ctx := context.Background()
	// A fingerprint of this test's own: the schema given back is the only
	// one to claim, and no other test process claims it.
	fp := poolSetup.fp
	poolSetup.fp = "own" + randomHex(4)
	t.Cleanup(func() { poolSetup.fp = fp })
	var mu sync.Mutex
	read := map[string]bool{}
	prev := claimRead
	claimRead = func(name string) {
		mu.Lock()
		defer mu.Unlock()
		read[name] = true
	}
	t.Cleanup(func() { claimRead = prev })
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var names []string
	for i := range 2 {
		t.Run(fmt.Sprint("writer", i), func(t *testing.T) {
			s := New(t)
			names = append(names, currentSchema(t, s))
			if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: fmt.Sprint("e", i), UserID: "ann", UserMessage: "I live in Paris", TurnAt: at}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Pool().Exec(ctx, `UPDATE prune_state SET context_high_water = 42`); err != nil {
				t.Fatal(err)
			}
		})
	}
	first, second := report(names[0]), report(names[1])
	if first.reason != "" || second.reason != "" || second.idle == "" {
		t.Fatalf("given back as %+v then %+v, want idle", first, second)
	}
	conn := connect(t, BaseURL())
	t.Cleanup(func() { _ = dropSchema(ctx, conn, second.idle) }) // of its own fingerprint: no test claims it
	mu.Lock()
	reread := read[names[1]]
	mu.Unlock()
	if reread {
		t.Errorf("schema %s (%s, given back by this process) was read again at its claim", names[1], first.idle)
	}
	_, freshURL := Schema(t)
	fresh := currentSchema(t, Open(t, freshURL))
	want, got := state(t, conn, fresh), state(t, conn, second.idle)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: reused %q, fresh %q", k, got[k], w)
		}
	}
}

// TestSweepDropsWhatDeadProcessesLeft: an in-use schema of a process that
// no longer runs (killed mid-test) and an old idle one of other migrations
// are dropped; a running process's, and a recent idle one of other
// migrations (another checkout's), are not.
func TestSweepDropsWhatDeadProcessesLeft(t *testing.T) {
	setupPool(t)
	ctx := context.Background()
	conn := connect(t, BaseURL())
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := usePrefix + strconv.Itoa(cmd.Process.Pid) + "_" + randomHex(5)
	live := usePrefix + strconv.Itoa(os.Getpid()) + "_" + randomHex(5)
	stale := idlePrefix + "0000000000_1764000000_" + randomHex(5) // November 2025
	recent := idleName("0000000000")                              // another checkout's, still in use
	for _, name := range []string{dead, live, stale, recent} {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dropSchema(ctx, conn, name) })
	}
	sweep(ctx, conn, poolSetup.fp)
	for name, want := range map[string]bool{dead: false, live: true, stale: false, recent: true} {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, name).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists != want {
			t.Errorf("schema %s exists %v after the sweep, want %v", name, exists, want)
		}
	}
}
