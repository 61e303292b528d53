package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestInTxCommitCutByALostConnectionIsUnconfirmed: a connection lost
// while its COMMIT was under way, within InTx's bound (the backend
// terminated, the TCP connection reset), returned the connection's error
// as it was, which callers answered "memory store unavailable" (or a
// worker's save took for nothing written), though the server may have
// committed: with the connection reset under a COMMIT held at a
// deferred trigger, the fact is there once the trigger lets it go. The
// error now wraps ErrCommitUnconfirmed, on both kinds of pool InTx
// runs on (memoryd's writes', and enrich's with CancelOnServer).
func TestInTxCommitCutByALostConnectionIsUnconfirmed(t *testing.T) {
	t.Parallel()
	runCommitCuts(t, commitCut{
		what: "InTx",
		hold: holdFactCommits,
		write: func(ctx context.Context, w *store.Store) error {
			return w.InTx(ctx, setLocation)
		},
		committed: func(t *testing.T, ctx context.Context, s *store.Store) {
			if _, err := s.Fact(ctx, "lena", "location"); err != nil {
				t.Fatalf("the fact whose COMMIT the server completed after the client's connection was reset: %v (the test's premise)", err)
			}
		},
	})
}

// commitCut is a write whose commit runCommitCuts cuts: what names it,
// hold holds its commit at a deferred trigger, write makes it on w, and
// committed fails the test unless the server committed it.
type commitCut struct {
	what      string
	prepare   func(t *testing.T, ctx context.Context, s *store.Store) // nil: nothing to prepare
	hold      func(t *testing.T, ctx context.Context, s *store.Store) *heldCommits
	write     func(ctx context.Context, w *store.Store) error
	committed func(t *testing.T, ctx context.Context, s *store.Store)
}

// runCommitCuts makes c's write, on both kinds of pool memoryd opens
// (its writes', and enrich's with CancelOnServer), with its commit held,
// then cuts it: its backend terminated, or its connection reset on the
// client's side only (the server goes on and commits it). Either way
// the write's error must wrap ErrCommitUnconfirmed.
func runCommitCuts(t *testing.T, c commitCut) {
	for _, cancelOnServer := range []bool{false, true} {
		for _, reset := range []bool{false, true} {
			how := "backend terminated"
			if reset {
				how = "connection reset"
			}
			t.Run(fmt.Sprintf("%s, CancelOnServer %v", how, cancelOnServer), func(t *testing.T) {
				ctx, s := setup(t)
				if c.prepare != nil {
					c.prepare(t, ctx, s)
				}
				h := c.hold(t, ctx, s)
				url := storetest.URL(t, s)
				var p *storetest.CutProxy
				if reset {
					p = storetest.StartCutProxy(t, url)
					url = p.URL()
				}
				w := openOn(t, ctx, url, cancelOnServer)
				res := make(chan error, 1)
				go func() { res <- c.write(ctx, w) }()
				pid := h.waiter(t, ctx, s)
				if reset {
					p.Cut() // the client's side only: the server goes on
				} else if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
					t.Fatal(err)
				}
				got := <-res
				h.release(t, ctx)
				h.ended(t, ctx, s)
				if reset {
					c.committed(t, ctx, s)
				}
				if !errors.Is(got, store.ErrCommitUnconfirmed) {
					t.Errorf("%s whose connection was lost (%s) during its commit returned %v; want it to wrap ErrCommitUnconfirmed", c.what, how, got)
				}
			})
		}
	}
}

// TestInTxFailureBeforeItsCommitIsPlain: an error before the COMMIT was
// sent (the backend terminated while the transaction's work ran), or the
// server's own refusal of the COMMIT (a deferred constraint failing),
// says the write was not done: not ErrCommitUnconfirmed.
func TestInTxFailureBeforeItsCommitIsPlain(t *testing.T) {
	t.Run("terminated during the work", func(t *testing.T) {
		ctx, s := setup(t)
		h := holdFactCommits(t, ctx, s)
		res := make(chan error, 1)
		go func() {
			res <- s.InTx(ctx, func(tx pgx.Tx, _ *store.Store) error {
				_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, h.key)
				return err
			})
		}()
		pid := h.waiter(t, ctx, s)
		if _, err := s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		got := <-res
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("InTx whose backend was terminated before its COMMIT returned %v; want a plain error", got)
		}
	})
	t.Run("connection closed before the commit", func(t *testing.T) {
		// fn's statement ended its connection (its error not returned):
		// the COMMIT is never sent, though pgx's error for it is the
		// same "conn closed" as for one cut while its answer was read.
		ctx, s := setup(t)
		got := s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
			if err := setLocation(tx, q); err != nil {
				return err
			}
			_, _ = tx.Exec(ctx, `SELECT pg_terminate_backend(pg_backend_pid())`)
			return nil
		})
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("InTx whose connection closed before its COMMIT was sent returned %v; want a plain error", got)
		}
		if _, err := s.Fact(ctx, "lena", "location"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the write whose COMMIT was never sent: %v; want nothing written", err)
		}
	})
	t.Run("idle in transaction past its timeout", func(t *testing.T) {
		// The server ends a session idle in its transaction past
		// idle_in_transaction_session_timeout (an operator's setting)
		// with a FATAL the client reads only as the COMMIT's answer: the
		// COMMIT never ran, the transaction rolled back.
		ctx, s := setup(t)
		got := s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
			if err := setLocation(tx, q); err != nil {
				return err
			}
			var pid int32
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SET LOCAL idle_in_transaction_session_timeout = 1`); err != nil {
				return err
			}
			eventstest.Eventually(t, "the idle transaction's backend to end", 30*time.Second, func() (bool, string) {
				var n int
				err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n)
				return err == nil && n == 0, fmt.Sprintf("%d, %v", n, err)
			})
			return nil
		})
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("InTx whose session the server ended while idle in its transaction returned %v; want a plain error", got)
		}
		if _, err := s.Fact(ctx, "lena", "location"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the write of the ended session: %v; want nothing written", err)
		}
	})
	t.Run("refused at the commit", func(t *testing.T) {
		ctx, s := setup(t)
		if _, err := s.Pool().Exec(ctx, `
			CREATE FUNCTION test_commit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'check_violation'; END $$;
			CREATE CONSTRAINT TRIGGER test_commit_refuse AFTER INSERT ON facts DEFERRABLE INITIALLY DEFERRED
				FOR EACH ROW EXECUTE FUNCTION test_commit_refuse()`); err != nil {
			t.Fatal(err)
		}
		got := s.InTx(ctx, setLocation)
		if got == nil || errors.Is(got, store.ErrCommitUnconfirmed) {
			t.Errorf("InTx whose COMMIT the server refused returned %v; want a plain error", got)
		}
		if _, err := s.Fact(ctx, "lena", "location"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused write: %v; want nothing written", err)
		}
	})
}

func setLocation(_ pgx.Tx, q *store.Store) error {
	_, err := q.UpsertFacts(context.Background(), []store.FactWrite{{UserID: "lena", Key: "location", Value: "Oslo",
		SourceAt: t0, Provenance: store.Provenance{Extractor: "direct"}}})
	return err
}

// openOn opens a store of two connections at url.
func openOn(t *testing.T, ctx context.Context, url string, cancelOnServer bool) *store.Store {
	t.Helper()
	w, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, MinConns: 1, CancelOnServer: cancelOnServer,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// waiter waits for one backend to wait for the held lock and returns its
// pid.
func (h *heldCommits) waiter(t *testing.T, ctx context.Context, s *store.Store) int32 {
	t.Helper()
	var pid int32
	eventstest.Eventually(t, "a backend to wait at the held lock", 30*time.Second, func() (bool, string) {
		rows, err := s.Pool().Query(ctx, `SELECT pid FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, h.key)
		if err != nil {
			return false, err.Error()
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil || len(pids) != 1 {
			return false, fmt.Sprintf("%v waiting, %v", pids, err)
		}
		pid = pids[0]
		return true, ""
	})
	return pid
}
