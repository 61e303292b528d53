package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestOpenWarmsThePool: Open returns with MinConns connections open and
// idle, so the first queries do not pay for connection setup; after the
// server dropped them (an outage), Warm opens live ones again.
func TestOpenWarmsThePool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	app := "warm_" + hex.EncodeToString(b[:])
	s, err := store.Open(ctx, store.Config{URL: url + "&application_name=" + app, MaxConns: 4, MinConns: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if idle := s.Pool().Stat().IdleConns(); idle < 3 {
		t.Fatalf("after Open the pool holds %d idle connections, want at least 3", idle)
	}
	admin := storetest.Open(t, url)
	backends := func() int {
		t.Helper()
		var n int
		if err := admin.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := backends(); n < 3 {
		t.Fatalf("%d server backends for the pool, want at least 3", n)
	}

	// The server drops every connection of the pool (an outage); the pool
	// still counts them idle.
	if _, err := admin.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, app); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the terminated backends to go", 30*time.Second, func() (bool, string) {
		n := backends()
		return n == 0, fmt.Sprintf("%d backends", n)
	})
	if err := s.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	if n := backends(); n < 3 {
		t.Fatalf("after Warm: %d server backends for the pool, want at least 3", n)
	}
}

// TestOpenHonoursPoolMaxConnsInURL: a connection string that caps the pool
// (pool_max_conns, as the tests and a user's DSN do) is not overridden by the
// default of 20, and the warm minimum stays within it.
func TestOpenHonoursPoolMaxConnsInURL(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	for _, tt := range []struct {
		cfg       store.Config
		max, mins int32
	}{
		{store.Config{URL: url + "&pool_max_conns=2"}, 2, 2},
		{store.Config{URL: url + "&pool_max_conns=2", MaxConns: 3}, 3, 3},
		{store.Config{URL: url}, 20, 4},
	} {
		tt.cfg.Logger = slog.New(slog.DiscardHandler)
		s, err := store.Open(context.Background(), tt.cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Pool().Config()
		s.Close()
		if got.MaxConns != tt.max || got.MinConns != tt.mins {
			t.Errorf("Open(%+v): MaxConns %d, MinConns %d; want %d, %d", tt.cfg.MaxConns, got.MaxConns, got.MinConns, tt.max, tt.mins)
		}
	}
}

// TestWarmStatementsPreparesEnrichStatements: with WarmStatements every
// connection the pool opens has enrich's statements prepared before it is
// handed out (the first enrich after start must not pay for it); without
// it, none are.
func TestWarmStatementsPreparesEnrichStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	storetest.Open(t, url) // migrated
	for _, warm := range []bool{true, false} {
		s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, MinConns: 2, WarmStatements: warm, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		conns := make([]interface{ Release() }, 0, 2)
		for range 2 {
			c, err := s.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var n int
			// The parameter keeps this statement's own text from matching.
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`,
				"FROM context WHERE user_id = $1").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if warm && n < 6 {
				t.Errorf("WarmStatements: a connection has %d of enrich's statements prepared, want at least 6 (plain, scoped, ranged; lexical and hybrid)", n)
			}
			if !warm && n != 0 {
				t.Errorf("without WarmStatements: a connection has %d recall statements prepared, want 0", n)
			}
		}
		for _, c := range conns {
			c.Release()
		}
		s.Close()
	}
}

// Connections name themselves in pg_stat_activity (and the server's logs):
// application_name memoryd unless the URL sets its own (the warm test's
// URL does). Before, they were blank.
func TestConnectionsNameTheApplication(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	s, err := store.Open(context.Background(), store.Config{URL: url, MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var name string
	if err := s.Pool().QueryRow(context.Background(), `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != store.ApplicationName {
		t.Fatalf("application_name = %q, want %q", name, store.ApplicationName)
	}
}
