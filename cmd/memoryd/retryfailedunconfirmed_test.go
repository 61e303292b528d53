package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestRetryFailedWhoseCommitWasCutSaysItMayBeDone: a retry-failed whose
// database connection is lost once its COMMIT was sent (its backend
// terminated while the COMMIT waits at a deferred trigger) may have set
// the turns back to pending: memoryd retry-failed says so and to run it
// again, not only "commit not confirmed"; run again, it re-enqueues them.
func TestRetryFailedWhoseCommitWasCutSaysItMayBeDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	st := storetest.Unmigrated(t, dbURL)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "a", UserID: "u", UserMessage: "hi a", TurnAt: at}}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkFailed(ctx, "u", []string{"a"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	key := rand.Int64()
	hold, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	// The retry's COMMIT waits at a deferred trigger for the test's lock.
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold AFTER UPDATE ON turns DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, key)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		errOut string
		code   int
	}
	res := make(chan result, 1)
	go func() {
		_, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed")
		res <- result{errOut, code}
	}()
	var pid int32
	eventstest.Eventually(t, "the retry's COMMIT to wait at the held trigger", time.Minute, func() (bool, string) {
		err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&pid)
		return err == nil, fmt.Sprint(err)
	})
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	got := <-res
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if got.code != 1 || !strings.Contains(got.errOut, "may be set back to pending already; run it again") {
		t.Errorf("retry-failed whose COMMIT's backend was terminated: exit %d, stderr %q; want it to say the turns may be set back and to run it again", got.code, got.errOut)
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed")
	if code != 0 || !strings.Contains(out, "1 failed turn(s) re-enqueued") {
		t.Fatalf("retry-failed run again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
