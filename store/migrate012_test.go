package store_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// Rows recorded before event ids became unique per user survive migration
// 012, get content hashes, and the new key then takes another user's turn
// with an old id.
func TestMigration012KeepsTurns(t *testing.T) {
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s := storetest.Unmigrated(t, url)
	if _, err := s.Migrate(ctx, migrationsUpTo(t, "011_~"), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO turns (event_id, user_id, user_message, turn_at, status, metadata) VALUES
		('e1', 'alice', 'I live in Paris.', '2026-11-01T10:00:00Z', 'processed', '{"k":1}'),
		('e2', 'alice', 'I live in Rome.', '2026-11-01T10:01:00Z', 'pending', NULL)`); err != nil {
		t.Fatal(err)
	}
	applied, err := s.Migrate(ctx, migrations.FS, slog.New(slog.DiscardHandler))
	if err != nil || len(applied) == 0 || applied[0] != 12 {
		t.Fatalf("migrate: %v, %v", applied, err)
	}
	for _, id := range []string{"e1", "e2"} {
		if _, err := s.GetTurn(ctx, "alice", id); err != nil {
			t.Fatalf("turn %s after migration: %v", id, err)
		}
	}
	out, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "alice", UserMessage: "I live in Paris.", TurnAt: t0, Metadata: []byte(`{"k":1}`)},
		{EventID: "e1", UserID: "bob", UserMessage: "I live in Oslo.", TurnAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	// alice's redelivery matches the backfilled hash; bob's turn is new.
	if len(out) != 2 || out[0] != store.TurnDuplicate || out[1] != store.TurnInserted {
		t.Fatalf("outcomes %v; want alice's a duplicate, bob's inserted", out)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE content_hash IS NOT NULL`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("turns with a content hash: %d, %v; want 3", n, err)
	}
}
