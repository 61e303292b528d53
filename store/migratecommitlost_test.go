package store_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestMigrationCommitCutByALostConnectionIsUnconfirmed: a migration
// whose connection is lost once its COMMIT was sent (the migration and
// its memoryd_migrations row in one transaction) may be applied: the
// error wraps ErrCommitUnconfirmed, as InTx's, where it was the
// connection's, read as a migration that failed.
func TestMigrationCommitCutByALostConnectionIsUnconfirmed(t *testing.T) {
	fsys := withTestMigration(t, "999_test_cut.sql", `CREATE TABLE test_cut_migrated (a int)`)
	runCommitCuts(t, commitCut{
		what: "a migration",
		hold: func(t *testing.T, ctx context.Context, s *store.Store) *heldCommits {
			return holdCommits(t, ctx, s, "AFTER INSERT ON memoryd_migrations")
		},
		write: func(ctx context.Context, w *store.Store) error {
			_, err := w.Migrate(ctx, fsys, nil)
			return err
		},
		committed: func(t *testing.T, ctx context.Context, s *store.Store) {
			var applied bool
			if err := s.Pool().QueryRow(ctx, `SELECT to_regclass('test_cut_migrated') IS NOT NULL`).Scan(&applied); err != nil || !applied {
				t.Fatalf("the migration whose COMMIT the server completed after the client's connection was reset: applied %v, %v (the test's premise)", applied, err)
			}
		},
	})
}
