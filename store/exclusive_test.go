package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestExclusivelyLeavesThePoolToItsRun: fn, run under the lock, gets the
// pool's connections for its own statements even when the pool has one
// (pool_max_conns=1): the lock is held on a connection outside the pool.
// Before, the lock held the pool's only connection for the run, and fn's
// first statement waited for it until ctx ended (a request sent alone
// after a crash never saved; with two connections, a prune beside it
// took the other one and each waited for the other's). And the lock is
// still one at a time across stores on the schema.
func TestExclusivelyLeavesThePoolToItsRun(t *testing.T) {
	t.Parallel()
	url := storetest.Migrated(t)
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool)
	other := storetest.Unmigrated(t, url)
	// A bound for the failure only: the run's statement waited this long
	// for the pool's connection before.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var otherRan bool
	ran, err := s.Exclusively(ctx, "test-pool", false, func() error {
		var one int
		if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			return err
		}
		var err error
		otherRan, err = other.Exclusively(ctx, "test-pool", false, func() error { return nil })
		return err
	})
	if !ran || err != nil {
		t.Fatalf("ran %v: %v; want the run, its statement answered", ran, err)
	}
	if otherRan {
		t.Error("another store took the lock while this one held it")
	}
	if ran, err := other.Exclusively(ctx, "test-pool", false, func() error { return nil }); !ran || err != nil {
		t.Errorf("after the run: ran %v: %v; want the lock released", ran, err)
	}
}
