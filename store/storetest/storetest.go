// Package storetest gives tests an isolated, migrated Postgres schema on the
// real server, so that tests can run in parallel and re-run cleanly.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// DefaultURL is the test server; MEMORYD_TEST_DATABASE_URL overrides it.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL returns the connection string of the test database.
func BaseURL() string {
	if u := os.Getenv("MEMORYD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates a fresh schema, dropped when the test ends, and returns its
// name and a connection string whose search_path selects it.
func Schema(t testing.TB) (name, url string) {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("storetest: connect to %s (is Postgres running? `make services` starts it): %v", BaseURL(), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("storetest: create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), BaseURL())
		if err != nil {
			t.Logf("storetest: drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Logf("storetest: drop schema %s: %v", name, err)
		}
	})
	sep := "?"
	if strings.Contains(BaseURL(), "?") {
		sep = "&"
	}
	return name, BaseURL() + sep + "search_path=" + name
}

// New returns a Store on a fresh, migrated schema. The pool is closed when the
// test ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	_, url := Schema(t)
	return Open(t, url)
}

// Open opens and migrates a store at url, closed when the test ends.
func Open(t testing.TB, url string) *store.Store {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	cfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool)
	if _, err := s.Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("storetest: migrate: %v", fmt.Sprint(err))
	}
	return s
}
