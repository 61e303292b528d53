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
