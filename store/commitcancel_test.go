package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
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
	key := rand.Int64()
	hold, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold AFTER INSERT ON facts DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, key)); err != nil {
		t.Fatal(err)
	}
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
	waiting := func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&n)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	}
	eventstest.Eventually(t, "the COMMIT to wait at the held trigger", 30*time.Second, waiting)
	cancel()
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	got := <-res
	// The transaction has ended on the server, whatever the client saw.
	eventstest.Eventually(t, "the held transaction to end", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory'
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&n)
		return err == nil && n == 0, fmt.Sprintf("%d locks, %v", n, err)
	})
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
// store's cancel request (CancelRequestContextWatcherHandler, not a mere
// closed socket, which the server notices only once its COMMIT is done)
// makes the server roll it back: the error says what the database holds,
// as InTx's comment promises. Held at a deferred trigger as above.
func TestInTxCommitPastItsBoundRollsBack(t *testing.T) {
	ctx, s := setup(t)
	key := rand.Int64()
	hold, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_commit_hold() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER test_commit_hold AFTER INSERT ON facts DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW EXECUTE FUNCTION test_commit_hold()`, key)); err != nil {
		t.Fatal(err)
	}
	got := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.UpsertFacts(ctx, []store.FactWrite{{UserID: "lena", Key: "location", Value: "Oslo",
			SourceAt: t0, Provenance: store.Provenance{Extractor: "direct"}}})
		return err
	})
	if got == nil {
		t.Fatal("InTx held at its COMMIT past its bound returned nil")
	}
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the held transaction to end", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory'
			AND ((l.classid::bigint << 32) | l.objid::bigint) = $1`, key).Scan(&n)
		return err == nil && n == 0, fmt.Sprintf("%d locks, %v", n, err)
	})
	if f, err := s.Fact(ctx, "lena", "location"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("InTx whose COMMIT outlasted its bound returned %v, and the fact is %+v, %v; want it rolled back", got, f, err)
	}
}
