package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestVacuumCatalogsWhenDeadRowsPileUp: with dead rows in the catalogs
// over the threshold, a give-back's vacuumCatalogs vacuums them (another
// test process may hold the lock a moment: tried again); right after, the
// process waits vacuumEvery before it looks again; under the threshold it
// does nothing.
func TestVacuumCatalogsWhenDeadRowsPileUp(t *testing.T) {
	ctx := context.Background()
	if !pooledOn(ctx) {
		t.Skipf("schema reuse is off (%s): nothing vacuums", poolSetup.why)
	}
	conn := connect(t, BaseURL())
	prev := vacuumDeadRows
	t.Cleanup(func() {
		vacuumDeadRows = prev
		vacuumState.Lock()
		vacuumState.last = time.Time{}
		vacuumState.Unlock()
	})
	due := func() {
		vacuumState.Lock()
		vacuumState.last = time.Time{}
		vacuumState.Unlock()
	}
	// Dead rows: a schema's table made and dropped.
	name := "t_" + randomHex(6)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name+"; CREATE TABLE "+name+".wide (a int, b int, c int, d int, e int); DROP SCHEMA "+name+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}

	vacuumDeadRows = 1 << 40
	due()
	if did, err := vacuumCatalogs(ctx, conn); did || err != nil {
		t.Fatalf("under the threshold: vacuumed %v, %v; want nothing done", did, err)
	}

	vacuumDeadRows = 1
	eventstest.Eventually(t, "a vacuum of the catalogs", 30*time.Second, func() (bool, string) {
		due()
		did, err := vacuumCatalogs(ctx, conn)
		if err != nil {
			t.Fatalf("vacuum the catalogs: %v", err)
		}
		return did, "another process held the lock, or no dead rows were counted"
	})
	if did, err := vacuumCatalogs(ctx, conn); did || err != nil {
		t.Fatalf("right after a vacuum: vacuumed %v, %v; want nothing done until vacuumEvery", did, err)
	}
}

// TestDDLLogIsVacuumedAndIndexed: the DDL log, which every claim and
// give-back reads and deletes from by schema, is vacuumed with the
// catalogs (nothing else vacuums it where autovacuum is off: a few hours
// of test runs left 130,000 dead rows in 9 MB, read whole at each lookup),
// and its lookups by schema go through an index.
func TestDDLLogIsVacuumedAndIndexed(t *testing.T) {
	ctx := context.Background()
	if !pooledOn(ctx) {
		t.Skipf("schema reuse is off (%s): nothing vacuums", poolSetup.why)
	}
	conn := connect(t, BaseURL())
	var indexed bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
		WHERE i.indrelid = '`+ddlLogTable+`'::regclass AND a.attname = 'schema_name')`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if !indexed {
		t.Errorf("the DDL log %s has no index leading with schema_name", ddlLogTable)
	}
	prev := vacuumDeadRows
	t.Cleanup(func() {
		vacuumDeadRows = prev
		vacuumState.Lock()
		vacuumState.last = time.Time{}
		vacuumState.Unlock()
	})
	vacuumed := func() (n int64) {
		if err := conn.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = '`+ddlLogTable+`'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := vacuumed()
	// A dead row in the log (of no schema in use).
	name := "t_" + randomHex(6)
	if _, err := conn.Exec(ctx, `INSERT INTO `+ddlLogTable+` (schema_name) VALUES ($1)`, name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `DELETE FROM `+ddlLogTable+` WHERE schema_name = $1`, name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
		t.Fatal(err)
	}
	vacuumDeadRows = 1
	eventstest.Eventually(t, "a vacuum of the catalogs", 30*time.Second, func() (bool, string) {
		vacuumState.Lock()
		vacuumState.last = time.Time{}
		vacuumState.Unlock()
		did, err := vacuumCatalogs(ctx, conn)
		if err != nil {
			t.Fatalf("vacuum the catalogs: %v", err)
		}
		return did, "another process held the lock, or no dead rows were counted"
	})
	if after := vacuumed(); after <= before {
		t.Errorf("the DDL log was not vacuumed with the catalogs: vacuum_count %d before, %d after", before, after)
	}
}
