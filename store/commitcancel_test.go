package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestInTxAnswersWhatItsCommitDid: a request's context cancelled while
// its transaction's COMMIT is under way (serve's shutdown halting the
// requests still running) made InTx return the cancellation though the
// server went on and committed: the enricher answered "memoryd stopped
// before this request was done: send it again" for a write that was done.
// Once the work is done its COMMIT is not cut short, and InTx's nil or
// error says what the database holds. The COMMIT is held at a deferred
// trigger waiting for the test's advisory lock, and the context cancelled
// meanwhile.
func TestInTxAnswersWhatItsCommitDid(t *testing.T) {
	ctx, s := setup(t)
	h := holdFactCommits(t, ctx, s)
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() {
		res <- s.InTx(reqCtx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.UpsertFacts(reqCtx, []store.FactWrite{{UserID: "lena", Key: "location", Value: "Oslo",
				SourceAt: t0, Provenance: store.Provenance{Extractor: "direct"}}})
			return err
		})
	}()
	eventstest.Eventually(t, "the COMMIT to wait at the held trigger", 30*time.Second, func() (bool, string) {
		n, err := h.waiters(ctx, s)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	cancel()
	h.release(t, ctx)
	got := <-res
	// The transaction has ended on the server, whatever the client saw.
	h.ended(t, ctx, s)
	_, ferr := s.Fact(ctx, "lena", "location")
	committed := ferr == nil
	if committed != (got == nil) {
		t.Fatalf("InTx cancelled at its COMMIT returned %v; the fact committed: %v (%v); want InTx to say what was done", got, committed, ferr)
	}
	if !committed {
		t.Errorf("the write whose work was done, cancelled at its COMMIT: not committed; want it committed and answered ok")
	}
}

// TestInTxCommitPastItsBoundRollsBack: a COMMIT that outlasts its own
// bound (5 s, apart from the request's context) returns an error, and the
// cancel request sent then (pgconn's, before it closes the connection, or
// CancelRequestContextWatcherHandler's with CancelOnServer, which waits
// for the server's answer) makes the server roll it back. The error wraps
// ErrCommitUnconfirmed either way, as InTx's comment says: InTx does not
// tell a rollback the server answered from a COMMIT it may go on with.
// Held at a deferred trigger as above, until the cancel request has ended
// the COMMIT's wait: on a loaded machine the cancel can take longer than
// closeDelay, InTx then returns first, and the server, its wait released,
// commits (the case the error leaves unknown; this test released it at
// once and failed 2 of 4 runs beside a CI run).
func TestInTxCommitPastItsBoundRollsBack(t *testing.T) {
	t.Parallel()
	for _, cancelOnServer := range []bool{false, true} {
		t.Run(fmt.Sprintf("CancelOnServer %v", cancelOnServer), func(t *testing.T) {
			ctx, s := setup(t)
			h := holdFactCommits(t, ctx, s)
			w := s
			if cancelOnServer {
				var err error
				w, err = store.Open(ctx, store.Config{URL: storetest.URL(t, s), MaxConns: 2, MinConns: 1, CancelOnServer: true,
					Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Close)
			}
			got := w.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
				_, err := q.UpsertFacts(ctx, []store.FactWrite{{UserID: "lena", Key: "location", Value: "Oslo",
					SourceAt: t0, Provenance: store.Provenance{Extractor: "direct"}}})
				return err
			})
			if !errors.Is(got, store.ErrCommitUnconfirmed) {
				t.Errorf("InTx held at its COMMIT past its bound returned %v, want ErrCommitUnconfirmed", got)
			}
			eventstest.Eventually(t, "the cancel request to end the COMMIT's wait", 30*time.Second, func() (bool, string) {
				n, err := h.waiters(ctx, s)
				return err == nil && n == 0, fmt.Sprintf("%d waiting, %v", n, err)
			})
			h.release(t, ctx)
			h.ended(t, ctx, s)
			if f, err := s.Fact(ctx, "lena", "location"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("InTx whose COMMIT outlasted its bound returned %v, and the fact is %+v, %v; want it rolled back", got, f, err)
			}
		})
	}
}

// heldCommits holds the COMMIT of every transaction that inserted a fact
// at a deferred trigger waiting for an advisory lock of key, which hold
// holds until release.
type heldCommits struct {
	key  int64
	hold *pgxpool.Conn
}

func holdFactCommits(t *testing.T, ctx context.Context, s *store.Store) *heldCommits {
	t.Helper()
	return holdCommits(t, ctx, s, "AFTER INSERT ON facts")
}

// holdCommits holds the COMMIT of every transaction that fired the
// deferred trigger of on ("AFTER INSERT ON facts") until release.
func holdCommits(t *testing.T, ctx context.Context, s *store.Store, on string) *heldCommits {
	t.Helper()
	h := &heldCommits{key: rand.Int64()}
	var err error
	if h.hold, err = s.Pool().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.hold.Release)
	if _, err := h.hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, h.key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold %s DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, h.key, on)); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *heldCommits) release(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := h.hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, h.key); err != nil {
		t.Fatal(err)
	}
}

// waiters counts the transactions waiting for the lock.
func (h *heldCommits) waiters(ctx context.Context, s *store.Store) (int, error) {
	var n int
	err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
		AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, h.key).Scan(&n)
	return n, err
}

// ended waits until no transaction holds or waits for the lock: the held
// transaction has ended on the server, whatever its client saw.
func (h *heldCommits) ended(t *testing.T, ctx context.Context, s *store.Store) {
	t.Helper()
	eventstest.Eventually(t, "the held transaction to end", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory'
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, h.key).Scan(&n)
		return err == nil && n == 0, fmt.Sprintf("%d locks, %v", n, err)
	})
}
