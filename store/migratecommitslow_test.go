package store_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

// TestMigrationCommitOutlastingInTxsBoundIsApplied: a migration whose
// COMMIT takes longer than InTx's CommitWait (its deferred triggers: 024's
// numbering of the memory changes a large data migration wrote, or a lock
// they wait for; a loaded machine) is applied, and Migrate says so. With
// InTx's bound its COMMIT was cancelled at 5 s and rolled back, and said
// unconfirmed: each run again the same, so the migration was never
// applied. The COMMIT is held at a deferred trigger past CommitWait.
func TestMigrationCommitOutlastingInTxsBoundIsApplied(t *testing.T) {
	ctx, s := setup(t)
	h, res := migrateHeld(t, ctx, ctx, s, "999_test_slow.sql", `CREATE TABLE test_slow_migrated (a int)`)
	// Held past the bound (a lower bound: a loaded machine holds it longer).
	var got error
	select {
	case got = <-res:
		t.Errorf("Migrate returned %v while its COMMIT was held; want it to wait for the COMMIT", got)
	case <-time.After(store.CommitWait + 2*time.Second):
	}
	h.release(t, ctx)
	if got == nil {
		got = <-res
	}
	h.ended(t, ctx, s)
	var applied bool
	if err := s.Pool().QueryRow(ctx, `SELECT to_regclass('test_slow_migrated') IS NOT NULL`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if got != nil || !applied {
		t.Errorf("a migration whose COMMIT outlasted %s: Migrate returned %v, the migration applied: %v; want it applied and Migrate nil", store.CommitWait, got, applied)
	}
}

// TestMigrationCommitInterruptedIsUnconfirmed: a migrate interrupted (its
// context ended: an operator's ^C) once a migration's COMMIT was sent
// says the commit was interrupted and may be done, not that the
// connection was lost.
func TestMigrationCommitInterruptedIsUnconfirmed(t *testing.T) {
	ctx, s := setup(t)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h, res := migrateHeld(t, ctx, mctx, s, "999_test_stopped.sql", `CREATE TABLE test_stopped_migrated (a int)`)
	cancel()
	got := <-res
	h.release(t, ctx)
	h.ended(t, ctx, s)
	if !errors.Is(got, store.ErrCommitUnconfirmed) || !strings.Contains(fmt.Sprint(got), "the commit was interrupted") {
		t.Errorf("Migrate interrupted at its COMMIT returned %v; want ErrCommitUnconfirmed, saying the commit was interrupted", got)
	}
}

// migrateHeld runs Migrate (with mctx) of memoryd's migrations and a test
// migration name holding sql, whose COMMIT it holds at a deferred trigger,
// and returns once the COMMIT waits there: the hold, and Migrate's result
// to come.
func migrateHeld(t *testing.T, ctx, mctx context.Context, s *store.Store, name, sql string) (*heldCommits, <-chan error) {
	t.Helper()
	fsys := withTestMigration(t, name, sql)
	h := holdCommits(t, ctx, s, "AFTER INSERT ON memoryd_migrations")
	res := make(chan error, 1)
	go func() {
		_, err := s.Migrate(mctx, fsys, nil)
		res <- err
	}()
	eventstest.Eventually(t, "the migration's COMMIT to wait at the held trigger", 30*time.Second, func() (bool, string) {
		n, err := h.waiters(ctx, s)
		return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
	})
	return h, res
}

// withTestMigration is memoryd's migrations and name, holding sql.
func withTestMigration(t *testing.T, name, sql string) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{name: {Data: []byte(sql)}}
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		data, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			t.Fatal(err)
		}
		fsys[n] = &fstest.MapFile{Data: data}
	}
	return fsys
}
