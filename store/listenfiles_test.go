package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// The changes listener's connection is made as the pool's new connections
// are, through the pool's BeforeConnect: Open's BeforeConnect reads the
// password file and TLS files again (rereadFiles), and a listener that
// reconnected with what was read at Open failed every attempt after a
// rotation (28P01, or an expired client certificate) until a restart,
// change notifications falling back to PollInterval.
func TestListenChangesConnectsThroughBeforeConnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	marker := "listen_" + hex.EncodeToString(b[:])
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pcfg.MaxConns, pcfg.MinConns = 1, 0
	pcfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.RuntimeParams["application_name"] = marker
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l, err := store.New(pool).ListenChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	admin := storetest.Open(t, url)
	var n int
	if err := admin.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, marker).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d listening backends with the application_name BeforeConnect set, want 1: the listener's connection skips the pool's BeforeConnect", n)
	}
}
