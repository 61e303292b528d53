package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestLockUsersWithinWaitsAsLockUsers: the pipelined lock timeout, user
// locks and tombstones of an extraction's save (LockUsersWithin) keep
// LockUsers' promises. A forget holding the user's lock past the timeout
// fails the batch with the lock's 55P03 (IsLockWait: the save snoozes)
// and the transaction is rolled back, its connection back in the pool
// and usable; a forget committing while the batch waits for its lock is
// in the tombstones the batch returns (read after the lock is held).
func TestLockUsersWithinWaitsAsLockUsers(t *testing.T) {
	ctx := context.Background()
	url := storetest.Migrated(t)
	s := storetest.Open(t, url)
	token := "alice"
	forget := func() (pgx.Tx, func()) {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// ForgetUser's lock of the user, exclusive.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1, 0))`, token); err != nil {
			t.Fatal(err)
		}
		return tx, func() { _ = tx.Rollback(ctx) }
	}

	held, release := forget()
	err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.LockUsersWithin(ctx, 50*time.Millisecond, []string{token})
		return err
	})
	release()
	if !store.IsLockWait(err) {
		t.Fatalf("LockUsersWithin beside a forget holding the user: %v; want a lock wait (55P03)", err)
	}
	_ = held
	// Rolled back, and its connection is usable: the same batch passes
	// once the forget is gone.
	err = s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.LockUsersWithin(ctx, time.Second, []string{token})
		return err
	})
	if err != nil {
		t.Fatalf("LockUsersWithin after the forget ended: %v", err)
	}

	// A forget that commits while the batch waits: its tombstone is read.
	held, release = forget()
	defer release()
	got := make(chan error, 1)
	var tombs map[string]store.Tombstone
	go func() {
		got <- s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			var err error
			tombs, err = q.LockUsersWithin(ctx, time.Minute, []string{token})
			return err
		})
	}()
	waitWaitingOn(t, ctx, s, held.Conn().PgConn().PID())
	if _, err := held.Exec(ctx, `INSERT INTO tombstones (user_token, stream_seq) VALUES ($1, 7)`, token); err != nil {
		t.Fatal(err)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if tomb, ok := tombs[token]; !ok || tomb.SeqAlone != 7 {
		t.Fatalf("tombstones read after the wait: %+v; want the forget's that committed meanwhile (sequence 7)", tombs)
	}

	// Outside a transaction it refuses: the pool's batch would be a
	// transaction of its own, its locks gone at its end.
	if _, err := s.LockUsersWithin(ctx, time.Second, []string{token}); err == nil {
		t.Fatalf("LockUsersWithin on the pool: %v; want an error", err)
	}
}

// waitWaitingOn polls until a backend waits for one of pid's locks,
// failing after a generous bound.
func waitWaitingOn(t *testing.T, ctx context.Context, s *store.Store, pid uint32) {
	t.Helper()
	eventstest.Eventually(t, "the batch to wait for the forget's lock", 30*time.Second, func() (bool, string) {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, int(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0, "nothing waits for the forget"
	})
}

// TestPipelinedLockWaitCutShort: a wait in a pipelined batch cut short
// (the job's context ends, the connection is lost) is named for the
// batch, not for its first statement. Postgres sends a pipeline's results
// only once it reads again, so the first statement's result is read only
// when the whole batch ends, and a cut wait fails that read: the save of
// a stopping worker logged "set lock timeout: timeout: context canceled"
// while it waited for a forget's user lock, and "lock resets" while it
// waited for a clear of its user.
func TestPipelinedLockWaitCutShort(t *testing.T) {
	ctx := context.Background()
	url := storetest.Migrated(t)
	s := storetest.Open(t, url)
	hold := func(lock string, args ...any) pgx.Tx {
		t.Helper()
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, lock, args...); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	cutShort := func(held pgx.Tx, fn func(ctx context.Context, q *store.Store) error) error {
		t.Helper()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := make(chan error, 1)
		go func() {
			got <- s.InTx(cctx, func(_ pgx.Tx, q *store.Store) error { return fn(cctx, q) })
		}()
		waitWaitingOn(t, ctx, s, held.Conn().PgConn().PID())
		cancel()
		return <-got
	}

	// A forget holding the user's lock.
	forget := hold(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1, 0))`, "alice")
	err := cutShort(forget, func(ctx context.Context, q *store.Store) error {
		_, err := q.LockUsersWithin(ctx, time.Minute, []string{"alice"})
		return err
	})
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "lock users: ") {
		t.Errorf("LockUsersWithin cut short waiting for a forget: %v; want the lock's error, context canceled", err)
	}

	// A clear of bob holding his clear lock.
	clear := hold(`SELECT pg_advisory_xact_lock(hashtext('memoryd.clear.' || current_schema()), hashtext($1))`, "bob")
	err = cutShort(clear, func(ctx context.Context, q *store.Store) error {
		return q.SaveMemory(ctx, nil, []store.ContextWrite{{UserID: "bob", Question: "q?", Answer: "a", CreatedAt: time.Now(), EventID: "e1"}})
	})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "lock resets:") {
		t.Errorf("SaveMemory cut short waiting for a clear: %v; want it named for the clear locks, context canceled", err)
	}
}
