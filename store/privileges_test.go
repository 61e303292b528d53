package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// appRole creates a role that is not a superuser and may only read and
// write the tables of schema (migrated by the test's superuser, who owns
// them), and returns url connecting as it (startup parameter role).
func appRole(t *testing.T, schema, url string) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "memoryd_app_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{role}.Sanitize()
	sch := pgx.Identifier{schema}.Sanitize()
	for _, q := range []string{
		"CREATE ROLE " + id + " NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE",
		"GRANT USAGE ON SCHEMA " + sch + " TO " + id,
		"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA " + sch + " TO " + id,
		"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA " + sch + " TO " + id,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), storetest.BaseURL())
		if err != nil {
			t.Log(err)
			return
		}
		defer conn.Close(context.Background())
		// After the schema's own cleanup (registered before): nothing is granted then.
		_, _ = conn.Exec(context.Background(), "DROP OWNED BY "+id)
		_, _ = conn.Exec(context.Background(), "DROP ROLE "+id)
	})
	return url + "&role=" + role
}

// A role that does not own memoryd's tables cannot VACUUM them, and
// Postgres only warns; VacuumDenied names the tables, the owner's none.
func TestVacuumDeniedNamesTablesOfAnotherOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, url := storetest.Schema(t)
	owner := storetest.Open(t, url)
	if _, tables, err := owner.VacuumDenied(ctx); err != nil || len(tables) != 0 {
		t.Fatalf("owner: VacuumDenied = %v, %v; want none", tables, err)
	}
	app := storetest.Unmigrated(t, appRole(t, schema, url))
	role, tables, err := app.VacuumDenied(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tables, slices.Sorted(slices.Values(store.VacuumedTables))) {
		t.Fatalf("app role %s: VacuumDenied = %v; want every one of %v", role, tables, store.VacuumedTables)
	}
	// What the check stands for: the VACUUM itself answers success.
	if err := app.VacuumTurns(ctx); err != nil {
		t.Fatalf("VacuumTurns as the app role: %v (Postgres skips with a warning, no error)", err)
	}
}

// A schema migrated by its owner needs no CREATE privilege to be
// "migrated" again with nothing pending (serve's default at start).
func TestMigrateUpToDateNeedsNoCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema, url := storetest.Schema(t)
	storetest.Open(t, url)
	app := storetest.Unmigrated(t, appRole(t, schema, url))
	if done, err := app.Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler)); err != nil || len(done) != 0 {
		t.Fatalf("Migrate as a role without CREATE on an up-to-date schema = %v, %v; want nothing done, no error", done, err)
	}
}
