// Command testdb prepares the tests' Postgres database before `make test`
// runs the suite: it creates it when missing, and vacuums its system
// catalogs when they hold many dead rows. A test that needs an empty schema
// creates one of some fifty tables and drops it (the others reuse migrated
// ones: store/storetest/pool.go); where autovacuum is off (as on the
// project's machines) the catalogs never shed those rows, and every catalog
// lookup slowed down from run to run: one session's CI found pg_attribute
// at 955 MB with 4.6 million dead rows and the suite taking 11 minutes,
// where it had taken under 7. A VACUUM FULL of the catalogs took 4 s and
// brought the database from 2 GB to 10 MB.
//
//	go run ./scripts/testdb
//
// It uses MEMORYD_TEST_DATABASE_URL, as the tests do. VACUUM FULL locks each
// catalog while it rewrites it, so it runs only when no other session uses
// the database; otherwise a plain VACUUM makes the dead rows' space
// reusable without blocking anyone.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store/storetest"
)

// deadRowsWorthIt is how many dead rows in pg_attribute make a vacuum worth
// its time (a few test runs' worth).
const deadRowsWorthIt = 200_000

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	url := storetest.BaseURL()
	if err := storetest.EnsureDatabase(ctx, url); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect to the tests' database: %w", err)
	}
	defer conn.Close(ctx)
	var dead, others int64
	if err := conn.QueryRow(ctx, `SELECT coalesce((SELECT n_dead_tup FROM pg_stat_sys_tables WHERE relid = 'pg_catalog.pg_attribute'::regclass), 0),
		(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid())`).Scan(&dead, &others); err != nil {
		return fmt.Errorf("read catalog statistics: %w", err)
	}
	if dead < deadRowsWorthIt {
		return nil
	}
	full := others == 0
	mode := "VACUUM (ANALYZE) "
	if full {
		mode = "VACUUM (FULL, ANALYZE) "
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, mode+storetest.Catalogs); err != nil {
		return fmt.Errorf("vacuum the catalogs: %w", err)
	}
	fmt.Printf("testdb: vacuumed the tests' database catalogs (%d dead rows in pg_attribute, full: %v) in %s\n",
		dead, full, time.Since(start).Round(time.Millisecond))
	return nil
}
