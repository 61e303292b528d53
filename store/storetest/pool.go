package storetest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// Migrated schemas are reused (New, Migrated). Creating, migrating and
// dropping a schema cost Postgres about 0.7 s of CPU (some 120 tables,
// indexes and functions, and River's tables); a run of the suite made 561
// of them, about a third of its CPU on 2 cores. Claiming one and emptying
// the tables its test wrote costs about 0.1 s.
//
// A schema is idle ("pi_<fp>_<unix seconds>_<random>", fp naming the
// migrations it holds) or in use ("pu_<pid>_<random>", pid the test
// process's). Idle schemas are shared by every test process of the
// database: one is claimed by renaming
// it to an in-use name (a rename two processes cannot both win), and given
// back, emptied and renamed to a new idle name, when its test ends. The
// rename cuts off any connection the test left behind: its search_path
// names a schema that no longer exists.
//
// A schema goes back only as new, which is checked rather than assumed:
//   - DDL: event triggers log every DDL command on an in-use schema (and a
//     GRANT or REVOKE, which names no schema, against all of them) in
//     storetest_ddl; a schema with DDL since it was claimed is dropped;
//   - rows: every table whose size differs from the schema's size when
//     claimed is truncated (a table never shrinks without a truncate, so a
//     test that inserted rows and deleted them is caught too), and a table
//     holding rows when claimed (the migrations' tables, prune_state) gets
//     them back when their content changed;
//   - planner statistics (ANALYZE, the pruning's VACUUM ANALYZE) are
//     deleted, sequences restarted;
//   - a failed test's schema is dropped, for the same reasons as before.
//
// New's pool goes with its schema, parked between tests (warm.go).
//
// Installing the event triggers needs a superuser (the tests' default,
// postgres); without one, every test gets a fresh schema as before.
// MEMORYD_TEST_FRESH_SCHEMAS=1 turns reuse off.
const (
	idlePrefix  = "pi_"
	usePrefix   = "pu_"
	staleAfter  = time.Hour // an idle schema of other migrations is dropped after
	maxIdle     = 16        // idle schemas kept; more are dropped
	poolVersion = "1"       // bump when the emptying changes
	ddlLogTable = "public.storetest_ddl"
)

// poolSetup is the process's one-time preparation (event triggers, the
// migrations' fingerprint, the sweep of what dead processes left).
var poolSetup struct {
	once sync.Once
	fp   string // "" when reuse is off
	// admin claims and gives back schemas: a connection costs Postgres
	// about 45 ms of CPU here, two a test without it.
	admin *pgxpool.Pool
	why   string // why it is off
}

// pooledOn prepares reuse once per process and reports whether it is on.
func pooledOn(ctx context.Context) bool {
	poolSetup.once.Do(func() {
		poolSetup.fp, poolSetup.why = preparePool(ctx)
		if poolSetup.fp != "" {
			cfg, err := pgxpool.ParseConfig(BaseURL())
			if err == nil {
				cfg.MaxConns = 2
				checkClient(cfg)
				// Most of its statements name a schema: not worth keeping.
				cfg.ConnConfig.StatementCacheCapacity = 32
				poolSetup.admin, err = pgxpool.NewWithConfig(ctx, cfg)
			}
			if err != nil {
				poolSetup.fp, poolSetup.why = "", err.Error()
			}
		}
	})
	return poolSetup.fp != ""
}

// pooledURL returns the URL of a migrated schema of the pool, claimed or,
// when none is idle, made; either way given back when the test ends, after
// the cleanups registered later (the pools and processes using it). ok is
// false when reuse is off.
func pooledURL(t testing.TB) (url string, ok bool) {
	t.Helper()
	c, ok := pooled(t)
	if !ok {
		return "", false
	}
	if c.warm != nil {
		// No New here to use the schema's parked pool: it stays parked,
		// kept or closed with the schema, not left open.
		c.warm.unclaim()
		c.parked = true
	}
	return schemaURL(c.name), true
}

// pooled is pooledURL's schema, claimed with the pool parked for it when
// this process parked one (warm.go).
func pooled(t testing.TB) (*claimed, bool) {
	t.Helper()
	ctx := context.Background()
	if !pooledOn(ctx) {
		return nil, false
	}
	// One connection throughout: see settle.
	conn, err := poolSetup.admin.Acquire(ctx)
	if err != nil {
		t.Fatalf("storetest: connect to %s (is Postgres running? `make testservices` starts it): %v", BaseURL(), err)
	}
	defer conn.Release()
	if c, ok := claim(ctx, conn, poolSetup.fp); ok {
		t.Cleanup(func() { giveBack(t, c) })
		noteRoutines(ctx, conn, c.name)
		return c, true
	}
	c := &claimed{name: usePrefix + strconv.Itoa(os.Getpid()) + "_" + randomHex(5)}
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{c.name}.Sanitize()); err != nil {
		t.Fatalf("storetest: create schema: %v", err)
	}
	t.Cleanup(func() { giveBack(t, c) })
	if err := migrate(ctx, schemaURL(c.name)); err != nil {
		t.Fatalf("storetest: migrate: %v", err)
	}
	noteRoutines(ctx, conn, c.name)
	// What the migrations made is what it must hold when given back.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name = $1`, c.name); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+ddlLogTable).Scan(&c.mark)
	})
	if err == nil {
		c.state, c.rows, err = contents(ctx, conn, c.name, nil)
	}
	if err == nil {
		var tables []string
		if tables, _, err = relations(ctx, conn, c.name); err == nil {
			c.stats, err = readPlanner(ctx, conn, c.name, tables)
		}
		if err == nil {
			err = settle(ctx, conn, c.name, tables)
		}
	}
	if err != nil {
		c.state = nil // dropped when given back
		t.Logf("storetest: schema %s will not be reused: %v", c.name, err)
	}
	return c, true
}

// migrate migrates the schema at url through a pool of its own, closed
// before it returns.
func migrate(ctx context.Context, url string) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.MaxConns = MaxConns
	checkClient(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = store.New(pool).Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler))
	return err
}

// claimed is an in-use schema and what it held, as migrated, when claimed.
type claimed struct {
	name  string
	mark  int64                 // the DDL log's last id when claimed
	state map[string]tableState // nil: drop it when given back
	rows  map[string]string     // digests of the tables holding rows
	stats planner               // the planner's figures of its relations
	// warm is New's pool on it (warm.go); parked when its test ends, it
	// is kept with the schema when given back as idle, closed otherwise.
	warm   *warmPool
	parked bool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func schemaURL(name string) string {
	// application_name names the schema's sessions, ended when it is
	// given back (a test's leaked or still running ones among them).
	return withSearchPath(name) + "&application_name=" + name
}

// withSearchPath is the test database's URL selecting schema name.
// SearchPathURL is the test database's URL with search_path set to path
// (schema names separated by commas).
func SearchPathURL(path string) string { return withSearchPath(path) }

func withSearchPath(name string) string {
	sep := "?"
	if strings.Contains(BaseURL(), "?") {
		sep = "&"
	}
	return BaseURL() + sep + "search_path=" + name
}

// fingerprint names the schema the migrations make: memoryd's files and
// River's version.
func fingerprint() string {
	h := sha256.New()
	h.Write([]byte(poolVersion))
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
		return nil
	})
	// River's own migrations (a test binary records no module versions).
	if m, err := rivermigrate.New(riverpgxv5.New(nil), nil); err == nil {
		for _, v := range m.AllVersions() {
			fmt.Fprintf(h, "river %d %d\n", v.Version, len(v.SQLUp))
			h.Write([]byte(v.SQLUp))
		}
	} else {
		h.Write([]byte(err.Error()))
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// ddlLogSQL installs the DDL log: a table and two event triggers, whose
// functions never fail a command (a logging error is swallowed; the
// schema's check then finds no log and the table missing, and drops it).
// Each row names the command and the kind of object it made or dropped,
// columns added to the log of an earlier version: a schema whose test only
// made or dropped functions and triggers is given back (routines.go). A
// trigger, rule or policy is logged under its table's schema (Postgres
// names none for them): a test's CREATE TRIGGER on a migration's function
// went unseen before.
const ddlLogSQL = `
CREATE TABLE IF NOT EXISTS ` + ddlLogTable + ` (
	id          bigserial   PRIMARY KEY,
	schema_name text        NOT NULL,
	at          timestamptz NOT NULL DEFAULT now());
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '` + ddlLogTable + `'::regclass AND attname = 'object_type' AND NOT attisdropped) THEN
		ALTER TABLE ` + ddlLogTable + ` ADD COLUMN IF NOT EXISTS command_tag text, ADD COLUMN IF NOT EXISTS object_type text;
	END IF;
	-- Read and deleted from by schema at each claim and give-back.
	IF to_regclass('public.storetest_ddl_schema') IS NULL THEN
		CREATE INDEX IF NOT EXISTS storetest_ddl_schema ON ` + ddlLogTable + ` (schema_name, id);
	END IF;
END $$;
CREATE OR REPLACE FUNCTION public.storetest_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO ` + ddlLogTable + ` (schema_name, command_tag, object_type)
	SELECT DISTINCT s, command_tag, object_type FROM (
		SELECT coalesce(d.schema_name, CASE WHEN d.object_type = 'schema' THEN d.object_identity END,
			(SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = CASE d.classid
				WHEN 'pg_trigger'::regclass THEN (SELECT tgrelid FROM pg_trigger WHERE oid = d.objid)
				WHEN 'pg_rewrite'::regclass THEN (SELECT ev_class FROM pg_rewrite WHERE oid = d.objid)
				WHEN 'pg_policy'::regclass THEN (SELECT polrelid FROM pg_policy WHERE oid = d.objid) END),
			'*') AS s, d.command_tag, d.object_type, d.schema_name IS NULL AND d.object_identity IS NULL AS nameless
		FROM pg_event_trigger_ddl_commands() d) x
	WHERE s LIKE 'pu\_%' OR nameless;
EXCEPTION WHEN OTHERS THEN NULL;
END $$;
CREATE OR REPLACE FUNCTION public.storetest_ddl_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
	INSERT INTO ` + ddlLogTable + ` (schema_name, command_tag, object_type)
	SELECT DISTINCT schema_name, TG_TAG, object_type FROM pg_event_trigger_dropped_objects() WHERE schema_name LIKE 'pu\_%';
EXCEPTION WHEN OTHERS THEN NULL;
END $$;
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'storetest_ddl_end') THEN
		CREATE EVENT TRIGGER storetest_ddl_end ON ddl_command_end EXECUTE FUNCTION public.storetest_ddl_end();
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'storetest_ddl_drop') THEN
		CREATE EVENT TRIGGER storetest_ddl_drop ON sql_drop EXECUTE FUNCTION public.storetest_ddl_drop();
	END IF;
	-- Also in a session replicating (session_replication_role = replica).
	ALTER EVENT TRIGGER storetest_ddl_end ENABLE ALWAYS;
	ALTER EVENT TRIGGER storetest_ddl_drop ENABLE ALWAYS;
END $$;`

// preparePool installs the DDL log and sweeps: in-use schemas of processes
// that no longer run (killed mid-test), idle ones of other migrations, and
// old GRANT marks. It returns the fingerprint, or "" and why reuse is off.
func preparePool(ctx context.Context) (fp, why string) {
	if os.Getenv("MEMORYD_TEST_FRESH_SCHEMAS") == "1" {
		return "", "MEMORYD_TEST_FRESH_SCHEMAS=1"
	}
	if err := EnsureDatabase(ctx, BaseURL()); err != nil {
		return "", err.Error()
	}
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		return "", err.Error()
	}
	defer conn.Close(ctx)
	var super bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil || !super {
		return "", fmt.Sprintf("not a superuser (%v)", err)
	}
	// Installed by every process, so that a database keeps no older
	// version of the functions.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('memoryd.storetest.pool'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, ddlLogSQL)
		return err
	})
	if err != nil {
		return "", fmt.Sprintf("install the DDL log: %v", err)
	}
	fp = fingerprint()
	sweep(ctx, conn, fp)
	return fp, ""
}

// sweep drops what no process will give back or claim. Best effort: a
// schema another process drops or claims meanwhile is skipped.
func sweep(ctx context.Context, conn adminDB, fp string) {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'pu\_%' OR (nspname LIKE 'pi\_%' AND nspname NOT LIKE $1)`,
		idlePrefix+fp+`\_%`)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	local := localServer()
	for _, name := range names {
		if strings.HasPrefix(name, usePrefix) {
			pid, err := strconv.Atoi(strings.Split(strings.TrimPrefix(name, usePrefix), "_")[0])
			// Only a local server's in-use schemas are known dead: their
			// pids are this machine's.
			if err != nil || !local || processRuns(pid) {
				continue
			}
		}
		if strings.HasPrefix(name, idlePrefix) && !staleIdle(name, time.Now()) {
			continue
		}
		_ = dropSchema(ctx, conn, name)
	}
	_, _ = conn.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name = '*' AND at < now() - interval '1 day'`)
}

// idleName names an idle schema of fingerprint fp, made now.
func idleName(fp string) string {
	return idlePrefix + fp + "_" + strconv.FormatInt(time.Now().Unix(), 10) + "_" + randomHex(5)
}

// staleIdle reports whether an idle schema of another fingerprint is old
// enough to drop: another checkout's (other migrations) may still be using
// the pool, and its idle schemas only wait for it a while.
func staleIdle(name string, now time.Time) bool {
	parts := strings.Split(strings.TrimPrefix(name, idlePrefix), "_")
	if len(parts) != 3 {
		return true
	}
	made, err := strconv.ParseInt(parts[1], 10, 64)
	return err != nil || now.Sub(time.Unix(made, 0)) > staleAfter
}

func localServer() bool {
	u, err := url.Parse(BaseURL())
	if err != nil {
		return false
	}
	switch h := u.Hostname(); h {
	case "", "localhost", "127.0.0.1", "::1":
		return true
	default:
		return strings.HasPrefix(h, "/")
	}
}

func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// dropSchema drops a schema and its log rows, bounded by a lock timeout.
func dropSchema(ctx context.Context, conn adminDB, name string) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1min'"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name = $1`, name)
		return err
	})
}

// claim renames an idle schema to an in-use name and notes what it holds.
func claim(ctx context.Context, conn adminDB, fp string) (*claimed, bool) {
	// The schemas this process parked a pool for first (warm.go), then
	// those it gave back (givenBack).
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1
		ORDER BY nspname = ANY($2) DESC, nspname = ANY($3) DESC, random() LIMIT 4`, idlePrefix+fp+`\_%`, parkedNames(), givenBackNames())
	if err != nil {
		return nil, false
	}
	idle, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, false
	}
	for _, from := range idle {
		c := &claimed{name: usePrefix + strconv.Itoa(os.Getpid()) + "_" + randomHex(5)}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// Another process claiming the same schema holds it until it
			// commits; then this rename finds no such schema.
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '2s'"); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "ALTER SCHEMA "+pgx.Identifier{from}.Sanitize()+" RENAME TO "+pgx.Identifier{c.name}.Sanitize()); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name = $1`, c.name); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+ddlLogTable).Scan(&c.mark)
		})
		if err != nil {
			if w := unpark(from); w != nil {
				w.pool.Close() // its schema is another's now, or gone
			}
			continue
		}
		if w := unpark(from); w != nil {
			w.claim(c.name)
			c.warm = w
		}
		tables, _, err := relations(ctx, conn, c.name)
		if g := takeGivenBack(from); g != nil {
			c.state, c.rows, c.stats = g.state, g.rows, g.stats
		} else if err == nil {
			claimRead(c.name)
			c.state, c.rows, err = contents(ctx, conn, c.name, nil)
			if err == nil {
				c.stats, err = readPlanner(ctx, conn, c.name, tables)
			}
		}
		if err == nil {
			// Again, now that the last sessions of its previous test have
			// surely flushed theirs, and after this one's reads.
			err = settle(ctx, conn, c.name, tables)
		}
		if err != nil {
			if c.warm != nil {
				c.warm.pool.Close()
			}
			_ = dropSchema(ctx, conn, c.name)
			continue
		}
		return c, true
	}
	return nil, false
}

// tableState is what a table holds besides its rows: the size of every
// file (heap, free space map, visibility map, indexes, TOAST) and the
// planner's figures for it and its indexes.
type tableState struct {
	heap    int64 // the heap's main fork
	files   int64
	planner string
}

// contents reads each table's state from its files (pg_relation_size would
// open every relation, building a new connection's cache entries for some
// 110 of them) and, for the tables digest names (nil: those with a heap),
// a digest of their rows. A row written grows the heap by a page, which
// only a truncate, or a VACUUM that found the rows gone, takes back; the
// indexes and free space map keep what the vacuum's rows made of them.
func contents(ctx context.Context, q querier, schema string, digest map[string]string) (state map[string]tableState, digests map[string]string, err error) {
	tables, _, err := relations(ctx, q, schema)
	if err != nil {
		return nil, nil, err
	}
	// By name and oid, through pg_class's and pg_index's indexes: a scan
	// of pg_class by namespace reads all of a catalog that a run's schemas
	// bloat (100 ms in, 2 ms out of the bloat).
	rows, err := q.Query(ctx, `WITH t AS (
			SELECT c.oid, c.relname, c.reltoastrelid FROM pg_class c
			WHERE c.relname = ANY($2) AND c.relnamespace = to_regnamespace($1) AND c.relkind = 'r'),
		r AS (
			SELECT t.relname, t.oid AS rel, true AS heap FROM t
			UNION ALL SELECT t.relname, i.indexrelid, false FROM t JOIN pg_index i ON i.indrelid = t.oid
			UNION ALL SELECT t.relname, t.reltoastrelid, false FROM t WHERE t.reltoastrelid <> 0
			UNION ALL SELECT t.relname, i.indexrelid, false FROM t JOIN pg_index i ON i.indrelid = t.reltoastrelid WHERE t.reltoastrelid <> 0)
		SELECT r.relname,
			sum(CASE WHEN r.heap THEN coalesce((pg_stat_file(f.path, true)).size, -1) ELSE 0 END)::bigint,
			sum(coalesce((pg_stat_file(f.path, true)).size, -1) + coalesce((pg_stat_file(f.path || '_fsm', true)).size, 0)
				+ coalesce((pg_stat_file(f.path || '_vm', true)).size, 0))::bigint,
			string_agg(c.reltuples || '/' || c.relpages || '/' || c.relallvisible, ' ' ORDER BY c.oid)
		FROM r JOIN pg_class c ON c.oid = r.rel, LATERAL (SELECT pg_relation_filepath(r.rel) AS path) f
		GROUP BY r.relname`, schema, tables)
	if err != nil {
		return nil, nil, err
	}
	state = map[string]tableState{}
	var (
		name string
		ts   tableState
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &ts.heap, &ts.files, &ts.planner}, func() error {
		state[name] = ts
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if len(state) != len(tables) {
		return nil, nil, fmt.Errorf("schema %s holds %d of the %d tables migrated", schema, len(state), len(tables))
	}
	digests = map[string]string{}
	for table, ts := range state {
		if digest == nil && ts.heap == 0 {
			continue
		}
		if _, ok := digest[table]; digest != nil && !ok {
			continue
		}
		var d string
		qualified := pgx.Identifier{schema, table}.Sanitize()
		if err := q.QueryRow(ctx, `SELECT coalesce(jsonb_agg(to_jsonb(t) ORDER BY to_jsonb(t)::text)::text, '[]') FROM `+qualified+` t`).Scan(&d); err != nil {
			return nil, nil, err
		}
		digests[table] = d
	}
	return state, digests, nil
}

// resetCounters zeroes the activity statistics (rows inserted, live and
// dead, scans) of schema's tables and their indexes: the schema's last
// sessions flush theirs when they exit.
func resetCounters(ctx context.Context, q querier, schema string, tables []string) error {
	rows, err := q.Query(ctx, `SELECT count(pg_stat_reset_single_table_counters(r)) FROM (`+relationsSQL+`) x`, schema, tables)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// settle sends conn's pending activity statistics (its reads, its
// truncates), then zeroes the schema's. A session sends them when idle, at
// most once a second, and may hold them for seconds: sent after the next
// test's, a truncate's would zero that test's counts of live and dead rows,
// which the pruning reads. conn must be the one connection that did the
// work, idle (not in a transaction).
func settle(ctx context.Context, conn adminDB, schema string, tables []string) error {
	// Flushed as the statement ends, before the next is read.
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		return err
	}
	return resetCounters(ctx, conn, schema, tables)
}

// planner is the planner's figures (pg_class's reltuples, relpages,
// relallvisible) of a schema's tables, their indexes and TOAST tables. A
// truncate leaves an index as none is made (-1 tuples, no page counted);
// a migration builds it (0 tuples, 1 page).
type planner struct {
	oids              []uint32
	tuples            []float32
	pages, allVisible []int32
}

const relationsSQL = `WITH t AS (SELECT oid, reltoastrelid FROM pg_class WHERE relname = ANY($2) AND relnamespace = to_regnamespace($1))
	SELECT oid AS r FROM t UNION ALL SELECT reltoastrelid FROM t WHERE reltoastrelid <> 0
	UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM t UNION ALL SELECT reltoastrelid FROM t)`

func readPlanner(ctx context.Context, q querier, schema string, tables []string) (p planner, err error) {
	rows, err := q.Query(ctx, `SELECT c.oid, c.reltuples, c.relpages, c.relallvisible FROM (`+relationsSQL+`) x JOIN pg_class c ON c.oid = x.r`, schema, tables)
	if err != nil {
		return p, err
	}
	var (
		oid        uint32
		tuples     float32
		pages, vis int32
	)
	_, err = pgx.ForEachRow(rows, []any{&oid, &tuples, &pages, &vis}, func() error {
		p.oids, p.tuples, p.pages, p.allVisible = append(p.oids, oid), append(p.tuples, tuples), append(p.pages, pages), append(p.allVisible, vis)
		return nil
	})
	return p, err
}

// restorePlanner sets the figures back (a superuser may update pg_class).
func restorePlanner(ctx context.Context, tx pgx.Tx, p planner) error {
	_, err := tx.Exec(ctx, `UPDATE pg_class c SET reltuples = v.tuples, relpages = v.pages, relallvisible = v.vis
		FROM unnest($1::oid[], $2::real[], $3::int[], $4::int[]) v(oid, tuples, pages, vis)
		WHERE c.oid = v.oid AND (c.reltuples, c.relpages, c.relallvisible) IS DISTINCT FROM (v.tuples, v.pages, v.vis)`,
		p.oids, p.tuples, p.pages, p.allVisible)
	return err
}

type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// adminDB is a connection or a pool.
type adminDB interface {
	querier
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	Begin(context.Context) (pgx.Tx, error)
}

// relNames are the tables and sequences a migrated schema holds: the same
// for every schema of a fingerprint, so read once per process.
var relNames struct {
	sync.Mutex
	tables, sequences []string
}

// relations returns relNames, reading them from schema the first time.
func relations(ctx context.Context, q querier, schema string) (tables, sequences []string, err error) {
	relNames.Lock()
	defer relNames.Unlock()
	if relNames.tables != nil {
		return relNames.tables, relNames.sequences, nil
	}
	rows, err := q.Query(ctx, `SELECT relname, relkind = 'S' FROM pg_class WHERE relnamespace = to_regnamespace($1) AND relkind IN ('r', 'S', 'p', 'm', 'f')`, schema)
	if err != nil {
		return nil, nil, err
	}
	var (
		name string
		seq  bool
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &seq}, func() error {
		if seq {
			sequences = append(sequences, name)
		} else {
			tables = append(tables, name)
		}
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if len(tables) == 0 {
		return nil, nil, fmt.Errorf("schema %s holds no table", schema)
	}
	relNames.tables, relNames.sequences = tables, sequences
	return tables, sequences, nil
}

// giveBack empties c and makes it idle again, or drops it when its test
// failed, changed its DDL, or emptying it failed; or when enough are idle.
func giveBack(t testing.TB, c *claimed) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One connection throughout: see settle.
	conn, err := poolSetup.admin.Acquire(ctx)
	if err != nil {
		t.Logf("storetest: give back schema %s: %v", c.name, err)
		c.closeWarm()
		return
	}
	defer conn.Release()
	defer func() { _, _ = vacuumCatalogs(ctx, conn) }()
	// The schema's sessions end first (a parked pool's are named apart) (waited for, up to 10 s each): one
	// still writing could commit after the emptying, and each flushes its
	// activity statistics as it exits.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, c.name); err != nil {
		t.Logf("storetest: end the sessions of schema %s: %v", c.name, err)
	}
	reason, idle := "its test failed", ""
	if !t.Failed() {
		if idle, reason, err = empty(ctx, conn, c); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		idle = ""
	}
	gaveBack(c.name, idle, reason)
	if reason == "" {
		noteGivenBack(idle, c)
		if c.warm != nil && c.parked {
			keep(idle, c.warm)
		}
		return
	}
	c.closeWarm()
	if err := dropSchema(ctx, conn, c.name); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			t.Logf("storetest: drop schema %s (%s): %v; sessions idle in a transaction: %s", c.name, reason, err, idleInTransaction(conn))
		} else {
			t.Logf("storetest: drop schema %s (%s): %v", c.name, reason, err)
		}
	}
}

// closeWarm closes c's parked pool: its schema is not kept.
func (c *claimed) closeWarm() {
	if c.warm != nil && c.parked {
		c.warm.pool.Close()
	}
}

// empty makes c idle again, as new, in one transaction. It returns why
// not, when the schema must be dropped instead.
func empty(ctx context.Context, conn adminDB, c *claimed) (idle, reason string, err error) {
	idle = idleName(poolSetup.fp)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '1min'"); err != nil {
			return err
		}
		var dirty, routinesOnly bool
		var nIdle int
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+ddlLogTable+` WHERE schema_name = $1 OR (schema_name = '*' AND id > $2)),
			NOT EXISTS (SELECT 1 FROM `+ddlLogTable+` WHERE (schema_name = $1 AND (command_tag IS NULL OR command_tag NOT IN `+routineTags+`
				OR object_type IS NULL OR object_type NOT IN `+routineObjects+`)) OR (schema_name = '*' AND id > $2)),
			(SELECT count(*) FROM pg_namespace WHERE nspname LIKE $3)`, c.name, c.mark, idlePrefix+poolSetup.fp+`\_%`).Scan(&dirty, &routinesOnly, &nIdle); err != nil {
			return err
		}
		ref := migratedRoutines()
		switch {
		case dirty && (!routinesOnly || ref == nil):
			reason = "its DDL changed"
			return nil
		case nIdle >= maxIdle:
			reason = "enough are idle"
			return nil
		}
		if c.state == nil {
			reason = "its contents as migrated are unknown"
			return nil
		}
		// Renamed first: a connection the test left behind now finds no
		// schema, instead of writing into the next test's.
		if _, err := tx.Exec(ctx, "ALTER SCHEMA "+pgx.Identifier{c.name}.Sanitize()+" RENAME TO "+pgx.Identifier{idle}.Sanitize()); err != nil {
			return err
		}
		if dirty {
			// Its test's own functions and triggers only (routines.go).
			if err := undoRoutines(ctx, tx, idle, ref); err != nil {
				return err
			}
		}
		state, digests, err := contents(ctx, tx, idle, c.rows)
		if err != nil {
			return err
		}
		if len(state) != len(c.state) {
			return fmt.Errorf("schema %s holds %d tables, %d when claimed", c.name, len(state), len(c.state))
		}
		var truncate []string
		for table, ts := range state {
			before, ok := c.state[table]
			if !ok {
				return fmt.Errorf("schema %s holds table %s, not there when claimed", c.name, table)
			}
			if ts != before || digests[table] != c.rows[table] {
				truncate = append(truncate, pgx.Identifier{idle, table}.Sanitize())
			}
		}
		// No trigger fires (the change log's among them), and no
		// foreign key is checked, while the tables are emptied.
		if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
			return err
		}
		if len(truncate) > 0 {
			if _, err := tx.Exec(ctx, "TRUNCATE "+strings.Join(truncate, ", ")+" CASCADE"); err != nil {
				return err
			}
		}
		for table, d := range c.rows {
			if digests[table] == d {
				continue
			}
			qualified := pgx.Identifier{idle, table}.Sanitize()
			if _, err := tx.Exec(ctx, `INSERT INTO `+qualified+` OVERRIDING SYSTEM VALUE SELECT * FROM jsonb_populate_recordset(NULL::`+qualified+`, $1::jsonb)`, d); err != nil {
				return fmt.Errorf("restore %s: %w", table, err)
			}
		}
		tables, sequences, err := relations(ctx, tx, idle)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `WITH t AS (SELECT oid FROM pg_class WHERE relname = ANY($2) AND relnamespace = to_regnamespace($1))
			DELETE FROM pg_catalog.pg_statistic WHERE starelid IN (SELECT oid FROM t UNION ALL SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT oid FROM t))`,
			idle, tables); err != nil {
			return err
		}
		// Materialized: pg_sequence_last_value must see only this schema's
		// sequences, not one of a schema another test is dropping.
		if _, err := tx.Exec(ctx, `WITH s AS MATERIALIZED (SELECT s.seqrelid, s.seqstart FROM pg_class c JOIN pg_sequence s ON s.seqrelid = c.oid
				WHERE c.relname = ANY($2) AND c.relnamespace = to_regnamespace($1))
			SELECT setval(seqrelid, seqstart, false) FROM s WHERE pg_sequence_last_value(seqrelid) IS NOT NULL`, idle, sequences); err != nil {
			return fmt.Errorf("restart sequences: %w", err)
		}
		if err := restorePlanner(ctx, tx, c.stats); err != nil {
			return fmt.Errorf("restore the planner's figures: %w", err)
		}
		// The check, as the next test will find it.
		after, afterRows, err := contents(ctx, tx, idle, c.rows)
		if err != nil {
			return err
		}
		for table, ts := range after {
			if ts != c.state[table] || afterRows[table] != c.rows[table] {
				return fmt.Errorf("table %s is not as claimed after emptying: %+v, want %+v", table, ts, c.state[table])
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name IN ($1, $2)`, c.name, idle)
		return err
	})
	if errors.Is(err, errRoutinesChanged) {
		return idle, "its DDL changed", nil
	}
	if err != nil || reason != "" {
		return idle, reason, err
	}
	// Idle now, emptied: its counters go as claim finds them. A failure
	// leaves them to the next claim's settle.
	if tables, _, err := relations(ctx, conn, idle); err == nil {
		_ = settle(ctx, conn, idle, tables)
	}
	return idle, "", nil
}

// givenBack is what the schemas this process gave back hold, as their
// give-back found them after emptying them, by idle name: its next claim
// here reads none of it again (the files of some 200 relations, the rows
// of the tables holding any, the planner's figures). Nothing writes an
// idle schema; and should something (an anti-wraparound VACUUM where
// autovacuum is on), the give-back after that claim empties it back to
// this, as migrated. A schema claimed by another process is given back
// under another name; its entry goes with the oldest.
var givenBack struct {
	sync.Mutex
	names []string // oldest first
	m     map[string]*claimed
}

// maxGivenBack bounds givenBack: idle schemas beyond maxIdle are dropped.
const maxGivenBack = 2 * maxIdle

func noteGivenBack(idle string, c *claimed) {
	givenBack.Lock()
	defer givenBack.Unlock()
	if givenBack.m == nil {
		givenBack.m = map[string]*claimed{}
	}
	givenBack.m[idle] = &claimed{state: c.state, rows: c.rows, stats: c.stats}
	givenBack.names = append(givenBack.names, idle)
	if len(givenBack.names) > maxGivenBack {
		delete(givenBack.m, givenBack.names[0])
		givenBack.names = givenBack.names[1:]
	}
}

func givenBackNames() []string {
	givenBack.Lock()
	defer givenBack.Unlock()
	return append([]string(nil), givenBack.names...)
}

// takeGivenBack returns what idle holds if this process gave it back, once.
func takeGivenBack(idle string) *claimed {
	givenBack.Lock()
	defer givenBack.Unlock()
	g := givenBack.m[idle]
	if g != nil {
		delete(givenBack.m, idle)
		for i, n := range givenBack.names {
			if n == idle {
				givenBack.names = append(givenBack.names[:i], givenBack.names[i+1:]...)
				break
			}
		}
	}
	return g
}

// claimRead is told each schema whose files, rows and planner figures a
// claim reads. Set by this package's tests.
var claimRead = func(name string) {}

// gaveBack is told each schema's end: its idle name, or why it was dropped
// instead. Set by this package's tests.
var gaveBack = func(name, idle, reason string) {}
