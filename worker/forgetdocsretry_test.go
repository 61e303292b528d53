package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// A forget whose delete of the user's documents Postgres rolls back to
// break a deadlock (40P01) redoes it, as it redoes its database side: it
// answered "incomplete" and left the documents to the next start. The
// forget's delete locks the jobs of alice's document last (having
// deleted the collection), in id order: j1, held by the second
// transaction, then j2, held by the third, which then asks for the
// collection: a cycle. Postgres checks a wait once, deadlock_timeout after
// it began, and the one whose check finds a cycle is rolled back. So the
// forget's last wait, for j2, begins only once the cycle is closed: it
// waits for j1 meanwhile, the third transaction waits for the collection,
// and only then is j1 let go. The forget's check finds the cycle however
// late each step runs (the third transaction's deadlock_timeout is long:
// it never checks). Closed within deadlock_timeout of the forget's wait,
// a stall of the test over 5 s left the holder waiting for ever.
func TestForgetRedoesADocumentsDeleteRolledBackForADeadlock(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := storetest.New(t)
	put, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"})
	if err != nil {
		t.Fatal(err)
	}
	var j1, j2 int64
	if err := s.Pool().QueryRow(ctx, `WITH j AS (INSERT INTO river_job (kind, args, queue, state, max_attempts)
		SELECT $1, jsonb_build_object('collection_id', $2::bigint, 'doc_id', 'd'), 'q', 'available', 5 FROM generate_series(1, 2) RETURNING id)
		SELECT min(id), max(id) FROM j`, worker.IndexDocumentJobKind, put.Collection.ID).Scan(&j1, &j2); err != nil {
		t.Fatal(err)
	}
	// lock begins a transaction holding job id; it returns the backend's pid.
	lock := func(id int64, deadlockTimeout string) (pgx.Tx, int) {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(ctx) })
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('deadlock_timeout', $1, true)`, deadlockTimeout); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, id); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	first, firstPID := lock(j1, "10min")
	hold, _ := lock(j2, "10min")
	// blocked waits until a backend waits for one pid holds and returns
	// its pid, or 0 once done says the other side ended first.
	blocked := func(pid int, done func() bool, what string) int {
		var waiter int
		eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) {
			if done() {
				return true, ""
			}
			err := s.Pool().QueryRow(ctx, `SELECT coalesce(min(pid), 0) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiter)
			return err == nil && waiter != 0, fmt.Sprint(waiter, err)
		})
		return waiter
	}
	var r worker.ForgetResult
	forgot := make(chan error, 1)
	go func() {
		var err error
		r, err = worker.Forget(ctx, e.js, s, e.prefix, e.stream, "alice")
		forgot <- err
	}()
	forget := blocked(firstPID, func() bool { return len(forgot) > 0 }, "the forget to wait for j1")
	if forget == 0 {
		t.Fatalf("the forget ended before it waited for j1: %v", <-forgot)
	}
	// The cycle: the holder waits for the collection the forget deleted.
	waited := make(chan error, 1)
	go func() {
		_, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, put.Collection.ID)
		waited <- err
	}()
	if blocked(forget, func() bool { return len(waited) > 0 }, "the holder to wait for the forget's collection") == 0 {
		t.Fatalf("the holder's ask for the collection ended before it waited for the forget: %v", <-waited)
	}
	// The forget's wait for j2 begins now, in the cycle.
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the holder's wait for the collection: %v (want the forget rolled back, not the holder)", err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatalf("forget: %v; want it done, its documents' delete redone", err)
	}
	if r.Documents != 1 {
		t.Errorf("the forget reports %d documents, want 1", r.Documents)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM collections) + (SELECT count(*) FROM river_job WHERE kind = $1)`, worker.IndexDocumentJobKind).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d collections or document jobs left (%v), want none", left, err)
	}
}
