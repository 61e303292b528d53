package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	neturl "net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// migrationsUpTo is memoryd's migrations whose file names sort up to last.
func migrationsUpTo(t *testing.T, last string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n <= last {
			data, err := fs.ReadFile(migrations.FS, n)
			if err != nil {
				t.Fatal(err)
			}
			m[n] = &fstest.MapFile{Data: data}
		}
	}
	return m
}

// TestMigrateRefusesBesideAnUnawareRelease: a release before migration 036
// does not notice a newer schema, so a rolling upgrade from it (its worker
// still beating) is refused before anything is applied; once it has
// stopped, the upgrade goes on.
func TestMigrateRefusesBesideAnUnawareRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := s.Migrate(ctx, migrationsUpTo(t, "035_~"), quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id) VALUES ('old-release')`); err != nil {
		t.Fatal(err)
	}
	applied, err := s.Migrate(ctx, migrations.FS, quiet)
	var old *store.RunningOlderReleaseError
	if !errors.As(err, &old) || old.Have != 35 || old.Processes != 1 || len(applied) != 0 {
		t.Fatalf("migrate beside a running release at 035: applied %v, %v; want a RunningOlderReleaseError, nothing applied", applied, err)
	}
	if !strings.Contains(err.Error(), "stop every process of it first") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
	var have int
	if err := s.Pool().QueryRow(ctx, `SELECT max(version) FROM memoryd_migrations`).Scan(&have); err != nil || have != 35 {
		t.Fatalf("newest migration after the refusal: %d, %v", have, err)
	}
	// The old release stopped (its heartbeat is a minute old).
	if _, err := s.Pool().Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	if applied, err := s.Migrate(ctx, migrations.FS, quiet); err != nil || len(applied) == 0 || applied[0] != 36 {
		t.Fatalf("migrate once the old release stopped: %v, %v", applied, err)
	}
	// From 036 on, a live process is a release that notices newer schemas.
	if _, err := s.Pool().Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = now()`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx, migrations.FS, quiet); err != nil {
		t.Fatalf("migrate beside a release at or after 036: %v", err)
	}
}

// TestMigrateRetriesADeadlock: a migration that builds an index and then
// needs the table to itself, while a running process's transaction has read
// the table and then updates it (a rolling upgrade), deadlocks; Postgres
// rolls the migration back, and Migrate runs it again rather than failing
// the process that started it.
func TestMigrateRetriesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	base := fstest.MapFS{"001_t.sql": {Data: []byte(`CREATE TABLE t (id int PRIMARY KEY, x int); INSERT INTO t VALUES (1, 0);`)}}
	if _, err := s.Migrate(ctx, base, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}

	// The running process: its transaction has read t (ACCESS SHARE).
	old, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx)
	if _, err := old.Exec(ctx, `SELECT x FROM t WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	// A gate the migration waits at between its index build and its need
	// for the table to itself, so that the update below waits first.
	gate, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	next := fstest.MapFS{"001_t.sql": base["001_t.sql"], "002_idx.sql": {Data: []byte(
		`CREATE INDEX t_x ON t (x); SELECT pg_advisory_xact_lock(4242); LOCK TABLE t IN ACCESS EXCLUSIVE MODE;`)}}
	var logs bytes.Buffer
	type result struct {
		applied []int
		err     error
	}
	done := make(chan result, 1)
	go func() {
		applied, err := s.Migrate(ctx, next, slog.New(slog.NewTextHandler(&logs, nil)))
		done <- result{applied, err}
	}()
	waiting := func(what, query string) {
		eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
			var ok bool
			err := s.Pool().QueryRow(ctx, `SELECT EXISTS (`+query+`)`).Scan(&ok)
			return err == nil && ok, fmt.Sprint(err)
		})
	}
	// The gate's backend: 4242 is the same key in every schema of the
	// database (another run of this test beside it).
	var gatePID int
	if err := gate.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&gatePID); err != nil {
		t.Fatal(err)
	}
	waiting("the migration at its gate, its index built", fmt.Sprintf(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted
		AND %d = ANY(pg_blocking_pids(pid))`, gatePID))
	// The running transaction updates t: it waits for the index build's
	// SHARE lock.
	updated := make(chan error, 1)
	go func() {
		_, err := old.Exec(ctx, `UPDATE t SET x = 1 WHERE id = 1`)
		if err == nil {
			err = old.Commit(ctx)
		}
		updated <- err
	}()
	waiting("the update behind the migration", `SELECT 1 FROM pg_locks WHERE relation = 't'::regclass AND mode = 'RowExclusiveLock' AND NOT granted`)
	// Through the gate, the migration asks for ACCESS EXCLUSIVE, which the
	// waiting transaction's read holds off: a deadlock, the migration's.
	if _, err := gate.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	if err := <-updated; err != nil {
		t.Fatalf("the running transaction's update: %v", err)
	}
	r := <-done
	if r.err != nil || len(r.applied) != 1 || r.applied[0] != 2 {
		t.Fatalf("migrate beside a deadlocking update: applied %v, %v", r.applied, r.err)
	}
	if !strings.Contains(logs.String(), "deadlock") {
		t.Errorf("the migration never met the deadlock this test builds (nothing to retry): %s", logs.String())
	}
	var idx bool
	if err := s.Pool().QueryRow(ctx, `SELECT to_regclass('t_x') IS NOT NULL`).Scan(&idx); err != nil || !idx {
		t.Fatalf("index t_x after the retried migration: %v, %v", idx, err)
	}
}

// TestMigrateRefusesBesideAReleaseBeforeProcesses: a release before
// migration 008 registers no processes, but its River clients elect a
// leader; a live lease refuses the migration as a heartbeat does.
func TestMigrateRefusesBesideAReleaseBeforeProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	quiet := slog.New(slog.DiscardHandler)
	if _, err := s.Migrate(ctx, migrationsUpTo(t, "007_~"), quiet); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_leader (elected_at, expires_at, leader_id) VALUES (now(), now() + interval '10 seconds', 'old-release')`); err != nil {
		t.Fatal(err)
	}
	applied, err := s.Migrate(ctx, migrations.FS, quiet)
	var old *store.RunningOlderReleaseError
	if !errors.As(err, &old) || old.Have != 7 || len(applied) != 0 {
		t.Fatalf("migrate beside a running release at 007: applied %v, %v; want a RunningOlderReleaseError, nothing applied", applied, err)
	}
	// Its lease ended (the process stopped).
	if _, err := s.Pool().Exec(ctx, `UPDATE river_leader SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if applied, err := s.Migrate(ctx, migrations.FS, quiet); err != nil || len(applied) == 0 || applied[0] != 8 {
		t.Fatalf("migrate once the old release stopped: %v, %v", applied, err)
	}
}

// TestMigration059DoesNotHoldReadersBehindItsWait: 059's ALTER TABLE waits
// for the transactions using context, and every read of context after it
// waited behind it (enrich's: an upgrade walk saw every reply degraded for
// the 9.4 s a long transaction held it back). With its lock_timeout it
// gives up within a second and the reads go on, while the transaction
// holding it back runs. The schema is put back to 058's for the run.
func TestMigration059DoesNotHoldReadersBehindItsWait(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.Pool().Exec(ctx, `ALTER TABLE context DROP COLUMN said_in; DROP FUNCTION memoryd_said_in`); err != nil {
		t.Fatal(err)
	}
	body, err := migrations.FS.ReadFile("059_context_said_in.sql")
	if err != nil {
		t.Fatal(err)
	}
	long, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Rollback(ctx)
	if _, err := long.Exec(ctx, `SELECT count(*) FROM context`); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() {
		migrated <- pgx.BeginFunc(ctx, s.Pool(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, string(body))
			return err
		})
	}()
	// Once the ALTER waits (or has given up already), a read of context
	// while the long transaction still runs: it waited behind the ALTER,
	// until the long transaction ended, which here it does only after the
	// read.
	var result error
	waiting := false
	for deadline := time.Now().Add(30 * time.Second); !waiting && result == nil; {
		select {
		case result = <-migrated:
			if result == nil {
				t.Fatal("the migration took its lock beside a transaction using context")
			}
		default:
		}
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE relation = 'context'::regclass AND NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration neither waited for its lock nor ended")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var n int
	if err := s.Pool().QueryRow(rctx, `SELECT count(*) FROM context`).Scan(&n); err != nil {
		t.Fatalf("a read of context beside the migration's wait: %v; want it answered", err)
	}
	if result == nil {
		result = <-migrated
	}
	if err := result; !store.IsLockWait(err) {
		t.Fatalf("the migration beside a transaction using context: %v; want it to give up on the lock (run again by Migrate)", err)
	}
}

// TestMigrateRefusesAShadowingSearchPath: a search_path whose first schema
// holds a table named like one of memoryd's (a DBA's other.context) is
// refused, naming both, before any statement uses the wrong table (a walk
// saw serve start healthy and every context statement fail); so is one
// whose first schema is another, empty one (memoryd's locks, keyed by it,
// would not match other processes'); memoryd's schema first is fine.
func TestMigrateRefusesAShadowingSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home, homeURL := storetest.Schema(t)
	storetest.Open(t, homeURL) // migrated
	other, _ := storetest.Schema(t)
	migrate := func() error { t.Helper(); return migrate2(t, ctx, storetest.SearchPathURL(other+","+home)) }
	if want := "the search_path starts with schema " + other + ", but memoryd's tables are in " + home; !contains(migrate(), want) {
		t.Fatalf("a first schema other than memoryd's: want an error saying %q", want)
	} else if _, err := storetest.Unmigrated(t, storetest.SearchPathURL(other+","+home)).PendingMigrations(ctx, migrations.FS); !contains(err, want) {
		t.Fatalf("the check of a process that does not migrate = %v, want an error saying %q", err, want)
	} else if _, err := storetest.Unmigrated(t, storetest.SearchPathURL(other+","+home)).NewerMigrations(ctx, migrations.FS); !contains(err, want) {
		// Every command's first check (forget, export, memory).
		t.Fatalf("the check of a command that only reads or deletes = %v, want an error saying %q", err, want)
	}
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE `+other+`.context (id int, note text)`); err != nil {
		t.Fatal(err)
	}
	if want := "the search_path finds table " + other + ".context before memoryd's " + home + ".context"; !contains(migrate(), want) {
		t.Fatalf("a first schema holding a table named like memoryd's: want an error saying %q", want)
	} else if _, err := storetest.Unmigrated(t, storetest.SearchPathURL(other+","+home)).NewerMigrations(ctx, migrations.FS); !contains(err, want) {
		t.Fatalf("the check of a command that only reads or deletes = %v, want an error saying %q", err, want)
	}
	if err := migrate2(t, ctx, storetest.SearchPathURL(home+","+other)); err != nil {
		t.Fatalf("memoryd's schema first: %v", err)
	}
}

// contains reports whether err says want.
func contains(err error, want string) bool { return err != nil && strings.Contains(err.Error(), want) }

// migrate2 migrates the schema url's search_path selects.
func migrate2(t *testing.T, ctx context.Context, url string) error {
	t.Helper()
	_, err := storetest.Unmigrated(t, url).Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler))
	return err
}

// TestMigrateRefusesASchemaNameTooLongForRiver: a schema whose name is
// longer than River allows (store.MaxSchemaBytes, 46 bytes) is refused by
// Migrate and by the check of a process that does not migrate, naming
// the search_path: River names its notification channels after the
// schema, and Postgres refuses a channel name over 63 bytes. Before, a
// 51-byte schema migrated, and then every River job insert and every
// wake failed with "channel name too long". At the bound, a wake's
// notification reaches the channel River listens on.
func TestMigrateRefusesASchemaNameTooLongForRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := schemaNamed(t, store.MaxSchemaBytes+1)
	if err := migrate2(t, ctx, storetest.SearchPathURL(long)); !contains(err, "is 47 bytes long, more than the 46 River allows") || !contains(err, "--database-url's search_path") {
		t.Fatalf("migrate a schema of %d bytes: %v; want it refused, naming the search_path", len(long), err)
	}
	if _, err := storetest.Unmigrated(t, storetest.SearchPathURL(long)).PendingMigrations(ctx, migrations.FS); !contains(err, "more than the 46 River allows") {
		t.Fatalf("the check of a process that does not migrate, on a schema of %d bytes: %v; want it refused", len(long), err)
	}
	s := storetest.Open(t, storetest.SearchPathURL(schemaNamed(t, store.MaxSchemaBytes)))
	id := waitingJobs(t, s)("extract", "scheduled", `{"for": "alone"}`, time.Hour)
	inserted := riverInserts(t, s)
	if woken, err := s.WakeFirstWaiting(ctx, store.RiverJobs{Kind: "extract"}, "for", "alone", "holds"); err != nil || woken != id {
		t.Fatalf("wake on a schema of %d bytes: %d, %v; want job %d", store.MaxSchemaBytes, woken, err, id)
	}
	if q := inserted(); q != "q" {
		t.Errorf("River told of queue %q; want q", q)
	}
}

// TestMigrateRefusesASchemaNameWithAQuote: a schema whose name holds a
// double quote is refused by Migrate and by the check of a process that
// does not migrate, naming the search_path: River listens on channels
// named after the schema, quoted without escaping, so every LISTEN of its
// notifier would fail. Before, such a schema migrated and River's
// notifications failed at start.
func TestMigrateRefusesASchemaNameWithAQuote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := fmt.Sprintf(`t_%d_q"x`, time.Now().UnixNano())
	quoted := pgx.Identifier{name}.Sanitize()
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) }) // after the drop below
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+quoted+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", quoted, err)
		}
	})
	url := storetest.SearchPathURL(neturl.QueryEscape(quoted))
	if err := migrate2(t, ctx, url); !contains(err, "has a double quote in its name") || !contains(err, "--database-url's search_path") {
		t.Fatalf("migrate schema %s: %v; want it refused, naming the search_path", quoted, err)
	}
	if _, err := storetest.Unmigrated(t, url).PendingMigrations(ctx, migrations.FS); !contains(err, "has a double quote in its name") {
		t.Fatalf("the check of a process that does not migrate, on schema %s: %v; want it refused", quoted, err)
	}
}

// schemaNamed creates a schema whose name is n bytes long, dropped when
// the test ends, and returns its name.
func schemaNamed(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t_%d_", time.Now().UnixNano())
	name += strings.Repeat("x", n-len(name))
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), storetest.BaseURL())
		if err != nil {
			t.Logf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	return name
}
