package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestClockReadingIsTimedOnItsOwnConnection: a reading of Postgres's clock
// outside a transaction times its statement alone, on a connection it
// holds first: a wait for the pool's connection is not in its round trip
// (which would date the reading early and widen its uncertainty by half
// the wait). The pool's only connection is held, busy on the server, while
// the reading waits for it.
func TestClockReadingIsTimedOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool)
	held, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.RefreshClock(ctx) }()
	eventstest.Eventually(t, "the reading to wait for the pool's connection", 30*time.Second, func() (bool, string) {
		return pool.Stat().EmptyAcquireCount() > 0, ""
	})
	start := time.Now()
	// The connection kept busy, not a sleep for synchronisation: the
	// reading is already waiting for it.
	if _, err := held.Exec(ctx, `SELECT pg_sleep(0.2)`); err != nil {
		t.Fatal(err)
	}
	wait := time.Since(start)
	held.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, unc, ok := s.Clock().Offset()
	if !ok {
		t.Fatal("no reading")
	}
	if unc >= wait/2 {
		t.Fatalf("reading's uncertainty %s, at least half the %s it waited for a connection: the wait was timed as its round trip", unc, wait)
	}
}
