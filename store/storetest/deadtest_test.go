package storetest_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// deadTestEnv, set in a child test process's environment ("URL KEY"), makes
// TestLockWaitOfADeadTestEnds the child.
const deadTestEnv = "MEMORYD_TEST_STORETEST_DEAD"

// TestLockWaitOfADeadTestEnds: a test binary killed while a statement of
// its pool waits on a lock (go test's -timeout, a ^C) leaves no backend
// behind holding its locks, so that the next run's sweep can drop its
// schema. The child holds a lock on a table of the schema and waits on an
// advisory lock this test holds; once the child is killed, this test's
// DROP TABLE gets the table's lock well within its lock timeout. Before,
// the child's backend waited on for as long as the advisory lock was held,
// and the DROP timed out (as the sweep's DROP SCHEMA did, after a minute).
func TestLockWaitOfADeadTestEnds(t *testing.T) {
	if v := os.Getenv(deadTestEnv); v != "" {
		runDeadTest(t, v)
		return
	}
	t.Parallel()
	ctx := context.Background()
	storetest.SkipBefore14(t)
	schema, url := storetest.Schema(t)
	admin, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	table := pgx.Identifier{schema, "held"}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE TABLE "+table+" (x int)"); err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := int64(binary.LittleEndian.Uint64(b[:]))
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}

	pid, kill := storetest.StartChild(t, "TestLockWaitOfADeadTestEnds", deadTestEnv+"="+url+" "+strconv.FormatInt(key, 10))
	eventstest.Eventually(t, "the child waiting on the advisory lock", 30*time.Second, func() (bool, string) {
		var wait string
		err := admin.QueryRow(ctx, `SELECT coalesce(wait_event_type || '/' || wait_event, state) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&wait)
		if err != nil {
			return false, err.Error()
		}
		return wait == "Lock/advisory", wait
	})
	kill()

	// The advisory lock stays held: only the server's check of the dead
	// client ends the child's wait.
	drop, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer drop.Close(ctx)
	if _, err := drop.Exec(ctx, "SET lock_timeout = '30s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := drop.Exec(ctx, "DROP TABLE "+table); err != nil {
		t.Fatalf("drop the table the killed child locked: %v", err)
	}
}

// runDeadTest is the child: through a pool of storetest's, a transaction
// that locks the table and then waits on the parent's advisory lock, until
// the process is killed.
func runDeadTest(t *testing.T, v string) {
	url, key, _ := strings.Cut(v, " ")
	ctx := context.Background()
	s := storetest.Unmigrated(t, url)
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	storetest.PrintBackend(conn.Conn())
	_, err = conn.Exec(ctx, "BEGIN; LOCK TABLE held IN ACCESS SHARE MODE; SELECT pg_advisory_xact_lock("+key+"); COMMIT")
	t.Fatalf("the wait ended: %v", err)
}
