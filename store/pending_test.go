package store_test

import (
	"context"
	"io/fs"
	"log/slog"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store/storetest"
)

// PendingMigrations lists what Migrate would apply, River's and memoryd's,
// and applies nothing: all on a fresh schema, none after Migrate.
func TestPendingMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // asking twice applies nothing
		p, err := s.PendingMigrations(ctx, migrations.FS)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.River) == 0 || !slices.Equal(p.Memoryd, files) || p.Empty() {
			t.Fatalf("pending on a fresh schema: %+v; want River's and every one of %v", p, files)
		}
	}
	if _, err := s.Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingMigrations(ctx, migrations.FS); err != nil || !p.Empty() {
		t.Fatalf("pending after Migrate: %+v, %v; want none", p, err)
	}
}
