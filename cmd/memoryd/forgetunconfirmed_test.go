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
	"github.com/memoryd/memoryd/store/storetest"
)

// TestForgetWhoseCommitWasCutSaysItMayBeDone: a forget whose database
// connection is lost once its COMMIT was sent (its backend terminated
// while the COMMIT waits at a deferred trigger) may have deleted the
// memory: memoryd forget says so and to run it again, not that it
// deleted nothing; run again, it completes.
func TestForgetWhoseCommitWasCutSaysItMayBeDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	conn := []string{"--database-url", dbURL, "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream, "--log-level", "error"}
	if _, errOut, code := runArgs(ctx, append([]string{"publish", "--user", "alice", "--message", "I live in Oslo."}, conn...)...); code != 0 {
		t.Fatalf("publish: exit %d, %s", code, errOut)
	}
	got := commitCut(t, dbURL, "AFTER INSERT OR UPDATE ON tombstones", "the forget", func() (string, int) {
		_, errOut, code := runArgs(ctx, append([]string{"forget", "--user", "alice"}, conn...)...)
		return errOut, code
	})
	if got.code != 1 || !strings.Contains(got.errOut, "the memory may be deleted already; run it again") {
		t.Errorf("forget whose COMMIT's backend was terminated: exit %d, stderr %q; want it to say the memory may be deleted and to run it again", got.code, got.errOut)
	}
	out, errOut, code := runArgs(ctx, append([]string{"forget", "--user", "alice"}, conn...)...)
	if code != 0 || !strings.Contains(out, `"stream_events": 1`) {
		t.Fatalf("forget run again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// commitCutResult is what a command run under commitCut printed to stderr
// and its exit status.
type commitCutResult struct {
	errOut string
	code   int
}

// commitCut runs run (a command, what in messages) while a deferred
// constraint trigger on the table of on ("AFTER UPDATE ON turns") holds
// its transaction's COMMIT, terminates the backend of that COMMIT once it
// waits, and returns what run gave: a command whose connection is lost
// once its COMMIT was sent, which Postgres may or may not have committed.
func commitCut(t *testing.T, dbURL, on, what string, run func() (errOut string, code int)) commitCutResult {
	t.Helper()
	ctx := context.Background()
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
	// The command's COMMIT waits at a deferred trigger for the test's lock.
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold %s DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, key, on)); err != nil {
		t.Fatal(err)
	}
	res := make(chan commitCutResult, 1)
	go func() {
		errOut, code := run()
		res <- commitCutResult{errOut, code}
	}()
	var pid int32
	eventstest.Eventually(t, what+"'s COMMIT to wait at the held trigger", time.Minute, func() (bool, string) {
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
	return got
}
