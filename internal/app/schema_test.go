package app

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// A memoryd whose database a newer memoryd migrated (a rolling upgrade)
// refuses forget and replay --reset, whose writes the newer schema may
// need more of (036's import_sources left behind by an older forget), and
// still replays without a reset.
func TestOlderMemorydRefusesForgetOnANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t)
	first, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := first.Conn()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: cfg.Prefix, Stream: cfg.Stream}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Forget(ctx, "alice"); err != nil {
		t.Fatalf("forget on the schema this memoryd knows: %v", err)
	}
	_ = first.Stop(ctx)

	conn, err := pgxpool.New(ctx, cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, `INSERT INTO memoryd_migrations (version, name) VALUES (9999, '9999_from_the_future.sql')`); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	if _, err := a.Forget(ctx, "alice"); err == nil || !strings.Contains(err.Error(), "[9999]") {
		t.Errorf("forget on a newer schema: %v; want a refusal naming migration 9999", err)
	}
	if _, err := a.Replay(ctx, ReplayOptions{Reset: true}); err == nil || !strings.Contains(err.Error(), "replay --reset") {
		t.Errorf("replay --reset on a newer schema: %v; want a refusal", err)
	}
	if _, err := a.Replay(ctx, ReplayOptions{}); err != nil {
		t.Errorf("replay without a reset on a newer schema: %v", err)
	}
}
