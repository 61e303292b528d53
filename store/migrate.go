package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Migrate brings the schema up to date: River's tables first (rivermigrate),
// then memoryd's numbered migrations from fsys (files NNN_name.sql), each in
// its own transaction and recorded in memoryd_migrations. Concurrent callers
// (several serve processes starting at once) serialise on an advisory lock
// scoped to the current schema. It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context, fsys fs.FS, logger *slog.Logger) ([]int, error) {
	if logger == nil {
		logger = slog.Default()
	}
	files, err := migrationFiles(fsys)
	if err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	// A session lock held across River's and our migrations; released below
	// (and by Postgres if the connection dies).
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtext('memoryd.migrate.' || current_schema()))`); err != nil {
		return nil, fmt.Errorf("migrate: lock: %w", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtext('memoryd.migrate.' || current_schema()))`)
	}()

	if err := refuseRollingFromUnaware(ctx, conn); err != nil {
		return nil, err
	}
	if err := checkSearchPath(ctx, conn); err != nil {
		return nil, err
	}

	migrator, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{Logger: logger.With("component", "river")})
	if err != nil {
		return nil, fmt.Errorf("migrate river: %w", err)
	}
	for attempt := 1; ; attempt++ {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
		if err == nil || !lockTableFull(err) || attempt == migrateAttempts {
			break
		}
		logger.Warn("River's migration found Postgres's lock table full; retrying", "attempt", attempt, "max_attempts", migrateAttempts, "error", err)
		if err := sleepCtx(ctx, time.Duration(attempt)*migrateRetryBackoff); err != nil {
			return nil, fmt.Errorf("migrate river: %w", err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("migrate river: %w", privilegeHint(err))
	}

	// Created only when missing: CREATE TABLE IF NOT EXISTS checks the
	// CREATE privilege on the schema before it looks for the table, so a
	// role that only reads and writes the tables (migrated by their owner)
	// was refused at every serve's start with nothing to migrate.
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('memoryd_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS memoryd_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return nil, fmt.Errorf("migrate: %w", privilegeHint(err))
		}
	}
	applied, err := appliedMigrations(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	var done []int
	for _, f := range files {
		if applied[f.version] {
			continue
		}
		for attempt := 1; ; attempt++ {
			err = nil
			if pre := preSteps[f.version]; pre != "" {
				if _, err = conn.Exec(ctx, pre); err != nil {
					err = fmt.Errorf("before it: %w", err)
				}
			}
			if err == nil {
				// As InTx: a COMMIT whose connection is lost is
				// unconfirmed (run again, migrate applies it if it was
				// not). Bounded by ctx alone, not InTx's CommitWait: a
				// migration's COMMIT may take longer.
				err = runTx(ctx, conn, 0, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, f.sql); err != nil {
						return err
					}
					if step := goSteps[f.version]; step != nil {
						if err := step(ctx, &Store{pool: s.pool, db: tx, hooks: &hookBox{}, schemaVersion: s.schemaVersion}); err != nil {
							return err
						}
					}
					_, err := tx.Exec(ctx, `INSERT INTO memoryd_migrations (version, name) VALUES ($1, $2)`, f.version, f.name)
					return err
				})
			}
			if err == nil || !(IsLockWait(err) || lockTableFull(err)) || attempt == migrateAttempts {
				break
			}
			// A deadlock with the running processes' statements (a rolling
			// upgrade: a migration that builds an index, then drops one,
			// against an update of the same table), or a lock table other
			// sessions filled, rolled the migration back whole, so it is
			// simply run again.
			logger.Warn("migration met a deadlock with running statements, or a full lock table; retrying", "version", f.version, "name", f.name,
				"attempt", attempt, "max_attempts", migrateAttempts, "error", err)
			if err := sleepCtx(ctx, time.Duration(attempt)*migrateRetryBackoff); err != nil {
				return done, fmt.Errorf("migrate %s: %w", f.name, err)
			}
		}
		if err != nil {
			return done, &MigrationError{Name: f.name, Err: privilegeHint(err)}
		}
		logger.Info("applied migration", "version", f.version, "name", f.name)
		done = append(done, f.version)
	}
	return done, nil
}

// MigrationError is Migrate's error applying one of memoryd's migrations:
// the file's name and why. When its COMMIT's connection was lost, it wraps
// ErrCommitUnconfirmed: the migration may be recorded, and Migrate run
// again applies it only if it is not.
type MigrationError struct {
	Name string
	Err  error
}

func (e *MigrationError) Error() string { return fmt.Sprintf("migrate %s: %v", e.Name, e.Err) }
func (e *MigrationError) Unwrap() error { return e.Err }

// checkSearchPath refuses a search_path whose first schema is not the one
// holding memoryd's tables, or under which the name of one of the
// tables in memoryd's schema (memoryd's and River's: the schema of
// memoryd_migrations, or the one a first migration creates in) finds
// another schema's table first: every statement on it, and the
// migrations, would read and write that table. A walk of a DBA's settings
// (search_path = other, public, with an other.context) saw serve start
// healthy and every extraction, enrich, forget and prune fail on a
// missing column.
func checkSearchPath(ctx context.Context, conn DBTX) error {
	var table, home, first string
	err := conn.QueryRow(ctx, `
		SELECT c.relname, n.nspname, fn.nspname
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_class f ON f.oid = to_regclass(quote_ident(c.relname))
		JOIN pg_namespace fn ON fn.oid = f.relnamespace
		WHERE c.relnamespace = coalesce(
		        (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('memoryd_migrations')),
		        (SELECT oid FROM pg_namespace WHERE nspname = current_schema()))
		  AND c.relkind IN ('r', 'p', 'v', 'm')
		  AND f.oid <> c.oid
		ORDER BY c.relname LIMIT 1`).Scan(&table, &home, &first)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("store: check search_path: %w", err)
	default:
		return fmt.Errorf("store: the search_path finds table %s.%s before memoryd's %s.%s, so memoryd's statements would use it; put schema %s first in search_path (--database-url's search_path, or the role's or database's setting), or rename that table",
			first, table, home, table, home)
	}
	// memoryd's locks are keyed by current_schema(), the first schema of
	// the search_path that exists: a process whose search_path starts
	// with another (empty) schema would lock apart from the others, and a
	// forget or a clear would no longer exclude their writes.
	var current, tables *string
	if err := conn.QueryRow(ctx, `SELECT current_schema(),
		(SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('memoryd_migrations'))`).Scan(&current, &tables); err != nil {
		return fmt.Errorf("store: check search_path: %w", err)
	}
	if current != nil && tables != nil && *current != *tables {
		return fmt.Errorf("store: the search_path starts with schema %s, but memoryd's tables are in %s: memoryd's locks are kept per first schema, so processes with other search_paths would not exclude each other; put schema %s first in search_path (--database-url's search_path, or the role's or database's setting)",
			*current, *tables, *tables)
	}
	if current != nil && len(*current) > MaxSchemaBytes {
		return fmt.Errorf("store: schema %s, the first of the search_path, is %d bytes long, more than the %d River allows: River names its notification channels after it (%q the longest), and Postgres refuses a channel name over 63 bytes, so River's notifications would fail, and with them, past 50 bytes, every job insert; use a schema of a shorter name (--database-url's search_path, or the role's or database's setting)",
			*current, len(*current), MaxSchemaBytes, *current+".river_leadership")
	}
	if current != nil && strings.Contains(*current, `"`) {
		// River quotes the channel it listens on without escaping the
		// name (LISTEN "<schema>.river_insert"): a quote in it ends the
		// identifier early, and every LISTEN fails.
		return fmt.Errorf("store: schema %s, the first of the search_path, has a double quote in its name, which River's notification channels, named after it, cannot hold (its LISTEN would fail); use a schema whose name has none (--database-url's search_path, or the role's or database's setting)", *current)
	}
	return nil
}

// MaxSchemaBytes is the longest name of the schema memoryd's tables may
// be in: River names its notification channels "<schema>.<topic>", the
// longest topic being river_leadership, and Postgres refuses a channel
// name over 63 bytes (NAMEDATALEN - 1) in pg_notify and truncates it in
// LISTEN. River checks the same bound on a schema it is configured with
// (river.Config.Schema, "Schema length must be less than or equal to 46
// characters"), but memoryd's schema is the search_path's, which River
// takes from current_schema() unchecked: past 50 bytes every job insert
// failed ("channel name too long"), and past 46 River's leadership
// notifications (a leader's resignation) would.
const MaxSchemaBytes = 63 - len(".river_leadership")

// lockTableFull reports whether err is Postgres's "out of shared memory"
// (53200): its lock table, shared by every session
// (max_locks_per_transaction × max_connections), was full. A migration
// takes a lock per object it creates, and so does a DROP SCHEMA of a
// schema's tables in another session: several at once on one server (a
// test suite beside other work) filled it. Transient: the others commit.
func lockTableFull(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53200"
}

// sleepCtx waits d, or until ctx ends (its cause returned).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// migrateAttempts bounds how often one migration is run when it fails on a
// deadlock or a lock timeout (IsLockWait) or a full lock table
// (lockTableFull); the waits between grow by migrateRetryBackoff, 9 s in
// all.
const (
	migrateAttempts     = 10
	migrateRetryBackoff = 200 * time.Millisecond
)

type migrationFile struct {
	version int
	name    string
	sql     string
}

func migrationFiles(fsys fs.FS) ([]migrationFile, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("migrate: list: %w", err)
	}
	var files []migrationFile
	seen := map[int]string{}
	for _, name := range names {
		num, _, ok := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migrate: file %s is not named NNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrate: files %s and %s share version %d", other, name, v)
		}
		seen[v] = name
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migrate: read %s: %w", name, err)
		}
		files = append(files, migrationFile{version: v, name: name, sql: string(data)})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].version < files[j].version })
	return files, nil
}

// NewestMigration returns the highest version among fsys's migration files
// (files NNN_name.sql), 0 when there are none: Config.SchemaVersion of a
// program that migrates with fsys.
func NewestMigration(fsys fs.FS) (int, error) {
	files, err := migrationFiles(fsys)
	if err != nil || len(files) == 0 {
		return 0, err
	}
	return files[len(files)-1].version, nil
}

// schemaAwareSince is the first migration whose release notices a newer
// schema (it warns, and refuses forget, import and replay --reset: see
// NewerSchemaError). A release before it, left running while a newer one
// migrates, goes on writing as if nothing changed: it cannot record turns
// once 012 is applied (its ingest acks them undelivered when its forget
// moves the shared consumer), and its forget leaves memory that comes back.
const schemaAwareSince = 36

// liveProcessWindow is how recent a worker process's heartbeat must be for
// it to count as running: a few of its default 2s heartbeats, and more
// than the 10s after which other processes take its jobs over.
const liveProcessWindow = 30 * time.Second

// RunningOlderReleaseError refuses to migrate a database that a release
// unaware of newer schemas is still working on: a rolling upgrade from it
// loses turns, so it must be stopped first.
type RunningOlderReleaseError struct {
	// Have is the newest migration applied; Processes how many worker
	// processes sent a heartbeat within the last 30 seconds (at least 1
	// when River has a live leader).
	Have, Processes int
}

func (e *RunningOlderReleaseError) Error() string {
	return fmt.Sprintf("migrate: %d memoryd worker process(es) of a release before migration %03d (this database is at %03d) are running (a heartbeat in the last %s, or River's leader lease): "+
		"that release does not notice a newer schema and loses turns beside it, so stop every process of it first, then start this one (a stop-the-world upgrade; docs/operations.md, Rolling upgrades; a process stopped just now counts until its lease ends, %s at most)",
		e.Processes, schemaAwareSince, e.Have, liveProcessWindow, liveProcessWindow)
}

// refuseRollingFromUnaware returns a *RunningOlderReleaseError when the
// database's newest migration is before schemaAwareSince and a process of
// that release is alive on it: a worker whose heartbeat in
// memoryd_processes is recent, or River's elected leader whose lease has
// not expired (a release before migration 008 registers no processes, but
// every release runs River, whose clients elect a leader). It runs before
// this process starts River, so a leader is another process's. A fresh
// database, or one whose processes have all stopped, migrates.
func refuseRollingFromUnaware(ctx context.Context, conn DBTX) error {
	var migrated, processes, leader bool
	err := conn.QueryRow(ctx, `SELECT to_regclass('memoryd_migrations') IS NOT NULL, to_regclass('memoryd_processes') IS NOT NULL,
		to_regclass('river_leader') IS NOT NULL`).Scan(&migrated, &processes, &leader)
	if err != nil {
		return fmt.Errorf("migrate: read the applied migrations: %w", err)
	}
	if !migrated {
		return nil
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM memoryd_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: read the applied migrations: %w", err)
	}
	if have == 0 || have >= schemaAwareSince {
		return nil
	}
	var live, leaders int
	if processes {
		err := conn.QueryRow(ctx, `SELECT count(*) FROM memoryd_processes WHERE heartbeat_at > now() - make_interval(secs => $1)`,
			liveProcessWindow.Seconds()).Scan(&live)
		if err != nil {
			return fmt.Errorf("migrate: read the running processes: %w", err)
		}
	}
	if leader {
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_leader WHERE expires_at > now()`).Scan(&leaders); err != nil {
			return fmt.Errorf("migrate: read River's leader: %w", err)
		}
	}
	if live > 0 || leaders > 0 {
		return &RunningOlderReleaseError{Have: have, Processes: max(live, leaders)}
	}
	return nil
}

// NewerSchemaError says that a newer memoryd migrated the database beyond
// the migrations this one knows.
type NewerSchemaError struct {
	// Known is the newest migration this memoryd knows.
	Known int
	// Versions are the migrations recorded above Known.
	Versions []int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("a newer memoryd migrated this database (migrations %v; this one knows up to %d): run forget, import and replay --reset with the newer memoryd",
		e.Versions, e.Known)
}

// OlderSchemaError says that the database lacks migrations this memoryd
// knows: it was not migrated since an upgrade, and a write that relies on
// the newer tables would fail half-way through (or leave them out).
type OlderSchemaError struct {
	// Known is the newest migration this memoryd knows; Have the newest
	// recorded, 0 when none is.
	Known, Have int
}

func (e *OlderSchemaError) Error() string {
	return fmt.Sprintf("this database is migrated up to migration %d and this memoryd needs %d: run memoryd migrate (or start memoryd serve) first",
		e.Have, e.Known)
}

// NewerMigrations returns the versions recorded in memoryd_migrations that
// fsys does not reach (above its newest file): a newer memoryd migrated this
// schema. Its writes may rely on tables this one does not know (036's
// import_sources), so this one's forget, import and reset would leave them
// out (Config.SchemaVersion makes them refuse). None when nothing was
// migrated yet.
func (s *Store) NewerMigrations(ctx context.Context, fsys fs.FS) ([]int, error) {
	newest, err := NewestMigration(fsys)
	if err != nil {
		return nil, err
	}
	// Every process checks this once it opened the store, also the
	// commands that neither migrate nor check for pending migrations
	// (forget, export, memory): each of their statements runs on the
	// search_path too, and a forget that deleted from another schema's
	// turns would answer ok.
	if err := checkSearchPath(ctx, s.db); err != nil {
		return nil, err
	}
	return s.migrationsAbove(ctx, newest)
}

// Pending is what Migrate would apply: River's migrations (as River's
// validation describes them) and memoryd's files, by name.
type Pending struct {
	River   []string
	Memoryd []string
}

// Empty reports whether nothing is pending.
func (p Pending) Empty() bool { return len(p.River) == 0 && len(p.Memoryd) == 0 }

// PendingMigrations is what Migrate would apply to the database now; it
// applies nothing.
func (s *Store) PendingMigrations(ctx context.Context, fsys fs.FS) (Pending, error) {
	var p Pending
	// A process that does not migrate (Config.NoMigrate) runs on the
	// search_path it is given all the same.
	if err := checkSearchPath(ctx, s.db); err != nil {
		return p, err
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return p, fmt.Errorf("check for pending migrations: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		return p, fmt.Errorf("check for pending migrations: river: %w", err)
	}
	if !res.OK {
		p.River = res.Messages
	}
	files, err := migrationFiles(fsys)
	if err != nil {
		return p, err
	}
	applied, err := appliedMigrations(ctx, s.db)
	if err != nil {
		return p, fmt.Errorf("check for pending migrations: %w", err)
	}
	for _, f := range files {
		if !applied[f.version] {
			p.Memoryd = append(p.Memoryd, f.name)
		}
	}
	return p, nil
}

// CheckSchema returns a *NewerSchemaError when the database holds
// migrations above Config.SchemaVersion, an *OlderSchemaError when it
// lacks some up to it (forget and the other commands that write without
// migrating, run from a new release before the database was migrated),
// and nil when it holds exactly those or when SchemaVersion is 0.
// ForgetUser, ResetMemory and Import run it inside their transaction,
// after the user's lock: a newer memoryd's write for the user committed
// before that lock was granted, and so did the migration it relied on.
func (s *Store) CheckSchema(ctx context.Context) error {
	if s.schemaVersion == 0 {
		return nil
	}
	// Asked first, since a missing table would abort the caller's
	// transaction.
	var migrated bool
	if err := s.db.QueryRow(ctx, `SELECT to_regclass('memoryd_migrations') IS NOT NULL`).Scan(&migrated); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if !migrated {
		return &OlderSchemaError{Known: s.schemaVersion}
	}
	ahead, err := s.migrationsAbove(ctx, s.schemaVersion)
	if err != nil {
		return err
	}
	if len(ahead) > 0 {
		return &NewerSchemaError{Known: s.schemaVersion, Versions: ahead}
	}
	var have int
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM memoryd_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if have < s.schemaVersion {
		return &OlderSchemaError{Known: s.schemaVersion, Have: have}
	}
	return nil
}

// migrationsAbove returns the versions in memoryd_migrations above newest.
func (s *Store) migrationsAbove(ctx context.Context, newest int) ([]int, error) {
	applied, err := appliedMigrations(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("newer migrations: %w", err)
	}
	var above []int
	for v := range applied {
		if v > newest {
			above = append(above, v)
		}
	}
	slices.Sort(above)
	return above, nil
}

// appliedMigrations is the versions memoryd_migrations records; none when
// the table does not exist (a database never migrated).
func appliedMigrations(ctx context.Context, db DBTX) (map[int]bool, error) {
	rows, err := db.Query(ctx, `SELECT version FROM memoryd_migrations`)
	var versions []int
	if err == nil {
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return map[int]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

// privilegeHint adds to a migration's permission error (42501
// insufficient_privilege: no CREATE on the schema, or not the owner of a
// table it alters) what the role lacks and what to do.
func privilegeHint(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return err
	}
	return fmt.Errorf("%w: migrations need a role that owns memoryd's tables and may CREATE in their schema (the database owner, or GRANT CREATE ON SCHEMA); run memoryd migrate with such a role, then start serve, replay and embed with --migrate=false under a role that only reads and writes the tables", err)
}
