package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestInTxEndsOnPanic: a panic in a transaction's function (a bug in a
// job's save, whose panic River recovers) rolls the transaction back and
// gives its connection back, as pgx.BeginFunc does. Before, the
// transaction stayed open on a connection the pool never got back, the
// rows it had locked held for good: the panic handler's writes to the
// job's turns (ending its claims, failing them) waited on them, and so did
// every later extraction of those turns and the user's forget.
func TestInTxEndsOnPanic(t *testing.T) {
	ctx, s := setup(t)
	burst(t, ctx, s, "c", 1)
	// A pool of the test's own: left open if its connection is not given
	// back (closing would wait for it).
	pool, err := pgxpool.New(ctx, storetest.URL(t, s))
	if err != nil {
		t.Fatal(err)
	}
	own := store.New(pool)
	var pid int32
	func() {
		defer func() {
			if p := recover(); p != "save bug" {
				t.Errorf("recovered %v; want the function's panic", p)
			}
		}()
		_ = own.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
			if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
				return err
			}
			if _, err := q.LockUnprocessedTurns(ctx, "alice", []string{"c-0"}); err != nil {
				return err
			}
			panic("save bug")
		})
	}()
	_, lockErr := s.Pool().Exec(ctx, `SELECT FROM turns WHERE user_id = 'alice' AND event_id = 'c-0' FOR UPDATE NOWAIT`)
	if acquired := pool.Stat().AcquiredConns(); lockErr != nil || acquired != 0 {
		// Its locks ended, so that the schema can be given back.
		_, _ = s.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		t.Fatalf("after a panic in InTx: the turn's lock %v, %d connections not given back; want the transaction rolled back, its connection back", lockErr, acquired)
	}
	pool.Close()
}
