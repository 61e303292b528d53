package storetest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store/storetest"
)

// freshDatabaseURL is the test server's URL naming a database that does not
// exist yet; it is dropped when the test ends.
func freshDatabaseURL(t *testing.T) (url, name string) {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	name = "storetest_" + hex.EncodeToString(b[:])
	base := storetest.BaseURL()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	url = strings.Replace(base, "/"+cfg.Database, "/"+name, 1)
	t.Cleanup(func() {
		admin := cfg.Copy()
		admin.Database = "postgres"
		conn, err := pgx.ConnectConfig(context.Background(), admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return url, name
}

// TestSchemaCreatesMissingDatabase: on a server without the test database
// (a fresh machine), Schema creates it instead of failing.
func TestSchemaCreatesMissingDatabase(t *testing.T) {
	url, name := freshDatabaseURL(t)
	t.Setenv("MEMORYD_TEST_DATABASE_URL", url)
	schema, schemaURL := storetest.Schema(t)
	conn, err := pgx.Connect(context.Background(), schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var db, path string
	if err := conn.QueryRow(context.Background(), "SELECT current_database(), current_setting('search_path')").Scan(&db, &path); err != nil {
		t.Fatal(err)
	}
	if db != name || path != schema {
		t.Fatalf("connected to %s with search_path %q; want %s, %q", db, path, name, schema)
	}
}

// TestEnsureDatabaseRace: test binaries run in parallel and race to create
// the database; every one of them must succeed.
func TestEnsureDatabaseRace(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		url, _ := freshDatabaseURL(t)
		url += "&application_name=race" // a distinct URL per round: no per-process cache hit
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Distinct URLs for the same database: each goroutine tries,
				// as separate processes would.
				errs <- storetest.EnsureDatabase(context.Background(), url+strings.Repeat("&connect_timeout=10", i+1))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// TestPoolParamsInTheURLAreIgnored: MEMORYD_TEST_DATABASE_URL with a pool
// parameter, as a caller capping memoryd's pools writes it, still gives
// schemas: before, Postgres refused pool_max_conns on the plain
// connections the helpers make, and every test failed.
func TestPoolParamsInTheURLAreIgnored(t *testing.T) {
	base := storetest.BaseURL()
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	t.Setenv("MEMORYD_TEST_DATABASE_URL", base+sep+"pool_max_conns=6&pool_min_conns=1")
	if got := storetest.BaseURL(); strings.Contains(got, "pool_") {
		t.Errorf("BaseURL %q keeps a pool parameter", got)
	}
	_, schemaURL := storetest.Schema(t)
	conn, err := pgx.Connect(context.Background(), schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}
