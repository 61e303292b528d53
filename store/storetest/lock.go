package storetest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// LockTable holds an EXCLUSIVE lock on table of s's schema (every write to
// it waits; reads go on) until release, or the test's end: a write a test
// wants held past its caller's timeout.
func LockTable(t testing.TB, s *store.Store, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("storetest: lock %s: %v", table, err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{table}.Sanitize()+" IN EXCLUSIVE MODE"); err != nil {
		t.Fatalf("storetest: lock %s: %v", table, err)
	}
	return func() {
		t.Helper()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatalf("storetest: unlock %s: %v", table, err)
		}
	}
}
