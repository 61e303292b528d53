package storetest

import (
	"context"
	"sync"
	"time"
)

// Catalogs are the system catalogs a schema's tables, indexes, functions
// and triggers add rows to, and that the pool's give-backs (truncates, the
// planner's figures set back, schemas renamed) update: each change leaves
// a dead row version behind.
const Catalogs = `pg_catalog.pg_attribute, pg_catalog.pg_depend, pg_catalog.pg_class, pg_catalog.pg_index,
	pg_catalog.pg_attrdef, pg_catalog.pg_constraint, pg_catalog.pg_type, pg_catalog.pg_proc, pg_catalog.pg_trigger,
	pg_catalog.pg_namespace, pg_catalog.pg_description, pg_catalog.pg_sequence, pg_catalog.pg_rewrite,
	pg_catalog.pg_statistic, pg_catalog.pg_init_privs`

// Where autovacuum is off (the project's machines and CI: the server's
// conf.d/90-ci.conf), nothing vacuums the catalogs during a run: one run of
// the suite left some 400,000 dead rows in pg_attribute and 180,000 in
// pg_class, and every catalog lookup (a new connection's cache, planning,
// the give-back's reads) walked them. The give-backs vacuum them as
// autovacuum would. store's tests alone (2026-12-06) took 108 s of Postgres
// CPU from a previous run's catalogs, 98 s from vacuumed ones, and 90-96 s
// with the catalogs vacuumed every few seconds during the run.
const (
	// vacuumEvery is how often a test process looks at the catalogs'
	// dead rows.
	vacuumEvery = 5 * time.Second
	// vacuumLock is the advisory lock that keeps to one the test
	// processes vacuuming at once.
	vacuumLock = int64(0x6d656d76_61637575) // "memvacuu"
)

// vacuumDeadRows is the dead rows in one catalog that make a vacuum worth
// it: some ten tests' worth. A variable for this package's tests.
var vacuumDeadRows int64 = 10_000

var vacuumState struct {
	sync.Mutex
	last time.Time
}

// vacuumCatalogs runs a plain VACUUM of the catalogs and the DDL log when
// one holds vacuumDeadRows dead rows, at most once every vacuumEvery per process and
// by one process of the database at a time (an advisory lock it does not
// wait for), and reports whether it did. A plain VACUUM blocks no one.
// Best effort for its callers: an error leaves it to the next give-back,
// or to `make test`'s VACUUM FULL before the next run (scripts/testdb).
func vacuumCatalogs(ctx context.Context, conn adminDB) (bool, error) {
	vacuumState.Lock()
	due := time.Since(vacuumState.last) >= vacuumEvery
	if due {
		vacuumState.last = time.Now()
	}
	vacuumState.Unlock()
	if !due {
		return false, nil
	}
	var dead int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(n_dead_tup), 0) FROM pg_stat_all_tables
		WHERE relid IN ('pg_catalog.pg_attribute'::regclass, 'pg_catalog.pg_class'::regclass, 'pg_catalog.pg_depend'::regclass,
			'`+ddlLogTable+`'::regclass)`).Scan(&dead); err != nil {
		return false, err
	}
	if dead < vacuumDeadRows {
		return false, nil
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, vacuumLock).Scan(&locked); err != nil || !locked {
		return false, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, vacuumLock) }()
	// The DDL log too: every claim and give-back writes and deletes its
	// rows (a migration's hundreds), and nothing else vacuums it.
	if _, err := conn.Exec(ctx, "VACUUM "+Catalogs+", "+ddlLogTable); err != nil {
		return false, err
	}
	return true, nil
}
