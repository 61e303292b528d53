package store

import (
	"cmp"
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// panicScanner panics in Scan, as a caller's scanning code may.
type panicScanner struct{}

func (panicScanner) Scan(any) error { panic("scan") }

// TestAutocommitRowReleasesItsConnectionOnAPanickingScan: a write's
// QueryRow whose Scan panics (a job's code, which River recovers) gives
// its connection back to the pool, as pgxpool's own row does (the pool
// destroys it, busy); kept, each such panic took one of the pool's
// connections for good.
func TestAutocommitRowReleasesItsConnectionOnAPanickingScan(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// storetest.DefaultURL, which this package's own tests cannot
	// import: skipped when the variable was unset, the test never ran in
	// CI (make test sets none).
	url := cmp.Or(os.Getenv("MEMORYD_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := autocommit{pool}
	// A write with no table of its own: a large object made and
	// dropped in one statement.
	const sql = `SELECT lo_unlink(lo_creat(-1))`
	if !isWrite(sql) {
		t.Fatal("the test's statement does not read as a write")
	}
	func() {
		defer func() { _ = recover() }()
		_ = a.QueryRow(ctx, sql).Scan(panicScanner{})
	}()
	// The connection, busy with the row's unread messages, is destroyed
	// and the pool opens another: an acquire gets one (a failure bound,
	// not a wait).
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	c, err := pool.Acquire(actx)
	if err != nil {
		// The pool is left open: its Close waits for the connection.
		t.Fatalf("no connection after a write's Scan panicked (%v): its connection was never given back", err)
	}
	c.Release()
	pool.Close()
}
