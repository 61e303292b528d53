package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestPingSaysWhenWritesAreRefused: Ping (/readyz's postgres check, and
// ingest's probe while it waits) fails on a database that answers but
// takes no writes (a standby named by the URL after a failover, or one
// set read-only), which before read "ok" while every write failed with
// 25006 (a dependency walk).
func TestPingSaysWhenWritesAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, readOnly := range []bool{false, true} {
		cfg, err := pgxpool.ParseConfig(storetest.BaseURL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 1
		if readOnly {
			cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = store.New(pool).Ping(ctx)
		pool.Close()
		if readOnly != errors.Is(err, store.ErrReadOnly) || !readOnly && err != nil {
			t.Errorf("Ping with read-only %v: %v", readOnly, err)
		}
	}
}
