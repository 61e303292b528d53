package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestSingleStatementWriteCutByALostConnectionIsUnconfirmed: a write run
// as one statement outside InTx (autocommit: the statement is its own
// transaction, committed before its answer) whose connection was lost
// once the statement was sent returned the connection's error as it was,
// which callers answered "memory store unavailable", nothing done,
// though the server may have committed: with the connection reset under
// a revoke held at a deferred trigger, the grant is gone once the
// trigger lets it go. Its error now wraps ErrCommitUnconfirmed, as
// InTx's does.
func TestSingleStatementWriteCutByALostConnectionIsUnconfirmed(t *testing.T) {
	t.Parallel()
	runCommitCuts(t, commitCut{
		what:    "a revoke",
		prepare: grantTeam,
		hold:    holdRevokeCommits,
		write: func(ctx context.Context, w *store.Store) error {
			_, err := w.RevokeReader(ctx, "team", "lena")
			return err
		},
		committed: func(t *testing.T, ctx context.Context, s *store.Store) {
			if n := readers(t, ctx, s); n != 0 {
				t.Fatalf("%d grants left after the revoke the server completed once the client's connection was reset (the test's premise)", n)
			}
		},
	})
}

// TestSingleStatementFailureThatSaysNothingWasDoneIsPlain: a statement
// the server refused (an ERROR: the transaction rolled back), one never
// sent (its context ended first), and a read whose connection was lost
// say nothing was written: not ErrCommitUnconfirmed.
func TestSingleStatementFailureThatSaysNothingWasDoneIsPlain(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ctx, s := setup(t)
		grantTeam(t, ctx, s)
		if _, err := s.Pool().Exec(ctx, `
			CREATE FUNCTION test_revoke_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused'; END $$;
			CREATE TRIGGER test_revoke_refuse BEFORE DELETE ON collection_readers
				FOR EACH ROW EXECUTE FUNCTION test_revoke_refuse()`); err != nil {
			t.Fatal(err)
		}
		_, got := s.RevokeReader(ctx, "team", "lena")
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("a revoke the server refused returned %v; want a plain error", got)
		}
		if n := readers(t, ctx, s); n != 1 {
			t.Errorf("%d grants after the refused revoke; want 1", n)
		}
	})
	t.Run("never sent", func(t *testing.T) {
		ctx, s := setup(t)
		grantTeam(t, ctx, s)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, got := s.RevokeReader(cctx, "team", "lena")
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("a revoke whose context had ended returned %v; want a plain error", got)
		}
	})
	t.Run("a read", func(t *testing.T) {
		ctx, s := setup(t)
		w := openOn(t, ctx, storetest.URL(t, s), false)
		// The read waits for a lock on facts held by another transaction,
		// and its backend is ended there.
		lock, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Rollback(ctx)
		if _, err := lock.Exec(ctx, `LOCK TABLE facts IN ACCESS EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		go func() { _, err := w.Fact(ctx, "lena", "location"); res <- err }()
		var pid int32
		eventstest.Eventually(t, "the read to wait at the lock", 30*time.Second, func() (bool, string) {
			err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_locks WHERE relation = 'facts'::regclass AND NOT granted`).Scan(&pid)
			return err == nil, fmt.Sprint(err)
		})
		if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		if got := <-res; got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("a read whose backend was terminated returned %v; want a plain error", got)
		}
	})
}

func grantTeam(t *testing.T, ctx context.Context, s *store.Store) {
	t.Helper()
	if _, err := s.GrantReader(ctx, "team", "lena"); err != nil {
		t.Fatal(err)
	}
}

func readers(t *testing.T, ctx context.Context, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM collection_readers WHERE scope = 'team' AND user_id = 'lena'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// holdRevokeCommits holds each commit of a delete from collection_readers
// at a deferred trigger until release.
func holdRevokeCommits(t *testing.T, ctx context.Context, s *store.Store) *heldCommits {
	t.Helper()
	return holdCommits(t, ctx, s, "AFTER DELETE ON collection_readers")
}
