package enricher_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestDirectWriteWaitsForAForgetInProgress: facts.set and store beside a
// forget of the same user are serialised by the user's forget lock. While a
// forget is in progress (here held inside its transaction by a turn row the
// test keeps locked), a facts.set waits for it and then writes the first
// fact of the user's new memory. Before, the write went ahead inside the
// forget, and one committing between the forget's deletes and its commit
// survived a forget that answered ok.
func TestDirectWriteWaitsForAForgetInProgress(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "hi", TurnAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	hold, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() {
		_, _, err := st.ForgetUser(context.Background(), "alice", events.UserToken("alice"), store.StreamPosition{}, store.RiverJobs{})
		forgot <- err
	}()
	holder := backendPID(t, hold)
	var forgetPID int
	eventstest.Eventually(t, "the forget to wait for the held turn", 30*time.Second, func() (bool, string) {
		forgetPID = waiterOf(t, st, "transactionid", holder)
		return forgetPID != 0, ""
	})

	set := make(chan error, 1)
	go func() {
		_, err := h.client.SetFact(context.Background(), "alice", "city", "Paris")
		set <- err
	}()
	eventstest.Eventually(t, "facts.set to wait for the forget, or answer", 30*time.Second, func() (bool, string) {
		select {
		case err := <-set:
			t.Fatalf("facts.set answered (%v) while the forget of the same user was in progress", err)
		default:
		}
		return waiterOf(t, st, "advisory", forgetPID) != 0, ""
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	// Written after the forget: the new memory's first fact.
	if f, err := st.Fact(ctx, "alice", "city"); err != nil || f.Value != "Paris" {
		t.Fatalf("fact after the forget = %+v, %v; want city=Paris written after it", f, err)
	}
}

// backendPID is the Postgres backend of tx's connection.
func backendPID(t *testing.T, tx pgx.Tx) int {
	t.Helper()
	var pid int
	if err := tx.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waiterOf is a backend waiting for a lock of locktype that backend holder
// holds, or 0. Only the test's own: pg_locks is the whole server's, and
// other tests and packages wait for locks of every type meanwhile (a count
// of any advisory or transactionid wait let a test go on before its own
// wait began, and fail, beside a CI run).
func waiterOf(t *testing.T, st *store.Store, locktype string, holder int) int {
	t.Helper()
	var pid int
	err := st.Pool().QueryRow(context.Background(), `SELECT pid FROM pg_locks
		WHERE NOT granted AND locktype = $1 AND $2 = ANY(pg_blocking_pids(pid)) LIMIT 1`, locktype, holder).Scan(&pid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return pid
}
