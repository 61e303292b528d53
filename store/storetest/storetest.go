// Package storetest gives tests an isolated, migrated Postgres schema on the
// real server, so that tests can run in parallel and re-run cleanly.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// DefaultURL is the test server; MEMORYD_TEST_DATABASE_URL overrides it. Its
// database is created when missing (see EnsureDatabase).
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// MaxConns caps each pool Open creates. The whole suite shares one server
// (max_connections 100 by default, with other users), and test binaries run
// in parallel, so every pool stays small.
const MaxConns = 4

// BaseURL returns the connection string of the test database, less any
// pool_ parameter of MEMORYD_TEST_DATABASE_URL (pool_max_conns, ...): the
// tests cap their pools themselves (MaxConns), and Postgres refuses the
// parameter on the plain connections they also make ("unrecognized
// configuration parameter"), which failed every test.
func BaseURL() string {
	if u := os.Getenv("MEMORYD_TEST_DATABASE_URL"); u != "" {
		return withoutPoolParams(u)
	}
	return DefaultURL
}

// withoutPoolParams is u without its pool_ query parameters; a connection
// string that is not a URL (keyword=value) is returned as it is.
func withoutPoolParams(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") {
		return u
	}
	q := p.Query()
	cut := false
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
			cut = true
		}
	}
	if !cut {
		return u
	}
	p.RawQuery = q.Encode()
	return p.String()
}

// Schema creates a fresh schema, dropped when the test ends, and returns its
// name and a connection string whose search_path selects it.
func Schema(t testing.TB) (name, url string) {
	t.Helper()
	ctx := context.Background()
	name = "t_" + randomHex(6)
	if err := EnsureDatabase(ctx, BaseURL()); err != nil {
		t.Fatalf("storetest: %v (is Postgres running? `make testservices` starts it)", err)
	}
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("storetest: connect to %s (is Postgres running? `make testservices` starts it): %v", BaseURL(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("storetest: create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), BaseURL())
		if err != nil {
			t.Logf("storetest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		// Bounded: a session left holding a lock in the schema (a leaked
		// transaction) would otherwise hang the package until go test's
		// timeout, which names no culprit. The schema is left behind then,
		// with the sessions that were idle in a transaction logged.
		if _, err := conn.Exec(context.Background(), "SET lock_timeout = '1min'"); err != nil {
			t.Logf("storetest: drop schema %s: %v", name, err)
			return
		}
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("storetest: drop schema %s: %v; sessions idle in a transaction: %s", name, err, idleInTransaction(conn))
		}
	})
	return name, withSearchPath(name)
}

// idleInTransaction lists the sessions idle in a transaction, with their
// last statement, for a cleanup that could not take its locks.
func idleInTransaction(conn querier) string {
	rows, err := conn.Query(context.Background(), `SELECT pid, left(query, 200) FROM pg_stat_activity
		WHERE state LIKE 'idle in transaction%' AND datname = current_database()`)
	if err != nil {
		return err.Error()
	}
	var out []string
	var (
		pid   int
		query string
	)
	if _, err := pgx.ForEachRow(rows, []any{&pid, &query}, func() error {
		out = append(out, fmt.Sprintf("pid %d: %s", pid, query))
		return nil
	}); err != nil {
		return err.Error()
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// Database creates a fresh database, dropped when the test ends, and returns
// its connection string. A test whose VACUUM must remove the rows it deleted
// takes one: VACUUM keeps the rows that a transaction of any other
// connection to the same database may still see, and the rest of the suite
// (every test binary) works in the shared database all the time.
func Database(t testing.TB) string {
	t.Helper()
	url, create := missingDatabase(t)
	create()
	return url
}

// MissingDatabase returns the connection string of a database that does
// not exist, dropped when the test ends should the test create it (as
// store.Config.CreateDatabase does).
func MissingDatabase(t testing.TB) string {
	t.Helper()
	url, _ := missingDatabase(t)
	return url
}

// missingDatabase names a fresh database, dropped (if it exists) when the
// test ends, and returns its connection string and a function creating it.
func missingDatabase(t testing.TB) (string, func()) {
	t.Helper()
	ctx := context.Background()
	name := "t_" + randomHex(6)
	u, err := url.Parse(BaseURL())
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("storetest: %s is not a postgres:// URL (%v)", BaseURL(), err)
	}
	admin := *u
	admin.Path = "/postgres"
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, admin.String())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	t.Cleanup(func() {
		if err := exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Logf("storetest: drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String(), func() {
		t.Helper()
		if err := exec("CREATE DATABASE " + name); err != nil {
			t.Fatalf("storetest: create database (is Postgres running? `make testservices` starts it): %v", err)
		}
	}
}

// New returns a Store on a migrated schema of its own, as new: a schema of
// an earlier test, emptied (see pool.go), or a fresh one. The pool is closed
// when the test ends, or parked with the schema for the next test of the
// process to claim it (warm.go): either way no connection of it is handed
// out after the test.
func New(t testing.TB) *store.Store {
	t.Helper()
	if c, ok := pooled(t); ok {
		if c.warm == nil {
			w, err := newWarmPool(c.name)
			if err != nil {
				t.Fatalf("storetest: %v", err)
			}
			c.warm = w
		}
		// Before the give-back, after the test's own cleanups (the
		// components using the pool).
		t.Cleanup(func() { c.parked = c.warm.park() })
		return store.New(c.warm.pool)
	}
	_, url := Schema(t)
	return Open(t, url)
}

// URL returns the connection string of s's schema, for another pool or
// connection on it, ended when the schema is given back as New's are. s is
// New's: its pool's Config() names the schema as it was first claimed
// (the same schema is renamed at each claim, see warm.go; the pool's
// connections are given its present name as they open).
func URL(t testing.TB, s *store.Store) string {
	t.Helper()
	var name string
	if err := s.Pool().QueryRow(context.Background(), `SELECT current_schema()`).Scan(&name); err != nil {
		t.Fatalf("storetest: the store's schema: %v", err)
	}
	return schemaURL(name)
}

// Migrated returns the connection string of a migrated schema of the test's
// own, as new, as New's: for a test whose program under test opens the
// store itself (and migrates it, finding nothing to do). The program must
// be stopped by a cleanup registered after this call, as one registered by
// the test after it is. Use Schema for a program that should meet an
// empty schema.
func Migrated(t testing.TB) string {
	t.Helper()
	if url, ok := pooledURL(t); ok {
		return url
	}
	_, url := Schema(t)
	if err := migrate(context.Background(), url); err != nil {
		t.Fatalf("storetest: migrate: %v", err)
	}
	return url
}

// Open opens and migrates a store at url, closed when the test ends.
func Open(t testing.TB, url string) *store.Store {
	t.Helper()
	s := Unmigrated(t, url)
	if _, err := s.Migrate(context.Background(), migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("storetest: migrate: %v", fmt.Sprint(err))
	}
	return s
}

// Unmigrated opens a store at url as it is, closed when the test ends.
func Unmigrated(t testing.TB, url string) *store.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	cfg.MaxConns = MaxConns
	checkClient(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(pool.Close)
	return store.New(pool)
}

var ensured sync.Map // database URL -> struct{}: created or found by this process

// EnsureDatabase creates the database named in url when it does not exist,
// connecting to the server's "postgres" database to do so, so that a fresh
// server needs no setup. Test binaries run in parallel and may race to create
// it: the loser's duplicate_database (42P04) or unique_violation (23505, from
// the catalog) means the database exists, which is success. A URL that
// already connects is left alone; the check runs once per URL per process.
func EnsureDatabase(ctx context.Context, url string) error {
	if _, ok := ensured.Load(url); ok {
		return nil
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse %s: %w", url, err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		ensured.Store(url, struct{}{})
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // not "database does not exist"
		return fmt.Errorf("connect to %s: %w", cfg.Database, err)
	}
	admin := cfg.Copy()
	admin.Database = "postgres"
	aconn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to database postgres to create %q: %w", cfg.Database, err)
	}
	defer aconn.Close(ctx)
	_, err = aconn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		err = nil // created meanwhile by a parallel test binary
	}
	if err != nil {
		return fmt.Errorf("create database %q: %w", cfg.Database, err)
	}
	ensured.Store(url, struct{}{})
	return nil
}

// clientCheckInterval is how often Postgres checks, while a statement of a
// test's pool runs, that the test process is still connected.
const clientCheckInterval = "2s"

// checkClient sets client_connection_check_interval (Postgres 14 and
// later) on cfg's new connections, unless the URL sets it (its own
// parameter, or options=-c). Without it, a statement of a test binary that
// died mid-way (go test's -timeout, a ^C, a SIGKILL), a lock wait or a long
// statement, runs or waits on with its locks after its process is gone: an
// idle backend sees its client leave at once, a busy one only when it
// next writes to it. The next run's sweep of the dead process's schema
// (preparePool) then waits for those locks, a minute, before every test
// of that run, and leaves the schema behind. A SET after connecting, not
// a startup parameter, which an older server refuses.
func checkClient(cfg *pgxpool.Config) {
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["client_connection_check_interval"]; ok || strings.Contains(rp["options"], "client_connection_check_interval") {
		return
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if serverMajor(conn.PgConn()) < 14 {
			return nil
		}
		if _, err := conn.PgConn().Exec(ctx, "SET client_connection_check_interval = '"+clientCheckInterval+"'").ReadAll(); err != nil {
			return fmt.Errorf("storetest: set client_connection_check_interval: %w", err)
		}
		return nil
	}
}

// serverMajor is the server's major version, from the server_version it
// reports when connecting ("15.8 (Debian 15.8-1)"); 0 when unreadable.
func serverMajor(pc *pgconn.PgConn) int {
	v := pc.ParameterStatus("server_version")
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		v = v[:end]
	}
	major, _ := strconv.Atoi(v)
	return major
}
