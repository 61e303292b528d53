package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memoryd/memoryd/migrations"
)

// TestMigration051StepLeavesFactsReadable: migration 051's Go step runs
// today's code, which needs migration 055's columns; adding them must not
// hold facts locked for the whole step (docs/operations.md, "Upgrading
// past migration 051": reads do not wait). A serve of the previous release
// reads facts for every enrichment meanwhile.
func TestMigration051StepLeavesFactsReadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, url, quiet := storeAt050(t)
	var id int64
	q := "Where do I buy Ko\u0308lsch?"
	if err := s.Pool().QueryRow(ctx, `INSERT INTO context (user_id, question, answer, created_at, content_hash, event_id)
		VALUES ('alice', $1, 'At the Brauhaus', now(), $2, 'e1') RETURNING id`, q, legacyHash("alice", q, "At the Brauhaus")).Scan(&id); err != nil {
		t.Fatal(err)
	}
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	// Holds the step at its rehash of the item (a row lock, which its
	// table lock does not conflict with), after the columns are added.
	holder := connect()
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM context WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Migrate(ctx, migrations.FS, quiet); done <- err }()
	var holderPID uint32 = holder.PgConn().PID()
	reader := connect()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var waiting bool
		if err := reader.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))`, int(holderPID)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration never reached the held item")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := reader.Exec(ctx, `SET lock_timeout = '1s'`); err != nil {
		t.Fatal(err)
	}
	var n int
	readErr := reader.QueryRow(ctx, `SELECT count(*) FROM facts`).Scan(&n)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if readErr != nil {
		t.Fatalf("reading facts during migration 051's step: %v; want it answered", readErr)
	}
}
