package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// migratedApp returns an App of cfg with the database migrated and the turn
// stream created, as a serve leaves them.
func migratedApp(t *testing.T, ctx context.Context, cfg Config) *App {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	nc, err := a.Conn()
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
	return a
}

// A memoryd whose database a newer memoryd migrated (a rolling upgrade)
// refuses forget and replay --reset, whose writes the newer schema may
// need more of (036's import_sources left behind by an older forget), and
// still replays without a reset.
func TestOlderMemorydRefusesForgetOnANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t)
	first := migratedApp(t, ctx, cfg)
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

// A new release's forget on a database an older release still runs (not
// yet migrated: forget does not migrate) refuses, saying to migrate,
// rather than failing on a table it expects half-way through.
func TestForgetOnAnOlderSchemaSaysToMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t)
	first := migratedApp(t, ctx, cfg)
	_ = first.Stop(ctx)
	conn, err := pgxpool.New(ctx, cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The newest migration undone, as if the database were one release
	// behind.
	var newest int
	if err := conn.QueryRow(ctx, `DELETE FROM memoryd_migrations WHERE version = (SELECT max(version) FROM memoryd_migrations) RETURNING version`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	_, err = a.Forget(ctx, "alice")
	var older *store.OlderSchemaError
	if !errors.As(err, &older) || older.Have != newest-1 || !strings.Contains(err.Error(), "memoryd migrate") {
		t.Errorf("forget on a database one migration behind: %v; want a refusal saying to run memoryd migrate (up to %d)", err, newest-1)
	}
}

// serve with another prefix on a stream whose ingest consumer another
// prefix's memoryd runs refuses before it sets anything up: no database
// migrated, the consumer unchanged.
func TestStartRefusesAnotherPrefixBeforeMigrating(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := startTestApp(t, nil)
	cfg := testConfig(t)
	unmigrated(t, &cfg)
	cfg.Stream = first.cfg.Stream // the same stream, another prefix and database
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	if err := a.Start(ctx); !errors.Is(err, worker.ErrConsumerOfAnotherPrefix) {
		t.Fatalf("start with another prefix on the stream: %v", err)
	}
	pool, err := pgxpool.New(ctx, cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var migrated bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('memoryd_migrations') IS NOT NULL`).Scan(&migrated); err != nil || migrated {
		t.Errorf("the refused start migrated its database (%v)", err)
	}
}

// A serve already running when a newer memoryd migrates the database (a
// rolling upgrade: the old processes started first) refuses forget and
// import from then on, over NATS as from the CLI, saying why, in its log
// too (an upgrade walk's old serves logged only "forgetting user" for a
// refused forget), and leaving the memory as it was; once the newer
// migration is gone (here: deleted, as if the upgrade were rolled back)
// they run again.
func TestRunningMemorydRefusesForgetAndImportAfterANewerMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs eventstest.SyncBuffer
	a := startTestApp(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	client := events.NewClient(a.nc, a.cfg.Prefix)
	if _, err := client.SetFact(ctx, "alice", "city", "Porto"); err != nil {
		t.Fatal(err)
	}
	var export strings.Builder
	if err := client.Export(ctx, "alice", &export); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, a.cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO memoryd_migrations (version, name) VALUES (9999, '9999_from_the_future.sql')`); err != nil {
		t.Fatal(err)
	}

	var se *events.ServiceError
	if _, err := client.Forget(ctx, "alice"); !errors.As(err, &se) || !strings.Contains(se.Description, "newer memoryd") || !strings.Contains(se.Description, "[9999]") {
		t.Errorf("forget over NATS on a newer schema: %v; want a refusal that names migration 9999", err)
	}
	if _, err := a.Forget(ctx, "alice"); err == nil || !strings.Contains(err.Error(), "[9999]") {
		t.Errorf("forget on a newer schema: %v; want a refusal naming migration 9999", err)
	}
	if _, err := client.Import(ctx, "bob", strings.NewReader(export.String())); !errors.As(err, &se) || !strings.Contains(se.Description, "[9999]") {
		t.Errorf("import over NATS on a newer schema: %v; want a refusal naming migration 9999", err)
	}
	var facts, bobs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE user_id = 'alice'), count(*) FILTER (WHERE user_id = 'bob') FROM facts`).Scan(&facts, &bobs); err != nil {
		t.Fatal(err)
	}
	if facts != 1 || bobs != 0 {
		t.Errorf("after the refusals alice has %d facts (want 1), bob %d (want 0)", facts, bobs)
	}
	for _, endpoint := range []string{"forget", "import"} {
		if !loggedRefusal(logs.String(), endpoint) {
			t.Errorf("no warning of the refused %s naming migration 9999 in the log:\n%s", endpoint, logs.String())
		}
	}

	if _, err := pool.Exec(ctx, `DELETE FROM memoryd_migrations WHERE version = 9999`); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Import(ctx, "bob", strings.NewReader(export.String())); err != nil {
		t.Errorf("import on the schema this memoryd knows: %v", err)
	}
	if r, err := client.Forget(ctx, "alice"); err != nil || r.Facts != 1 {
		t.Errorf("forget on the schema this memoryd knows: %+v, %v; want 1 fact deleted", r, err)
	}
}

// A forget request is answered while the App's lock is held, as Stop holds
// it while the endpoint's running requests finish: a forget that waited for
// the lock held up the shutdown for its whole timeout, then ran against a
// stopped worker.
func TestForgetNeedsNoAppLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, client := startWithAFact(t)
	a.mu.Lock()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	r, err := client.Forget(rctx, "alice")
	cancel()
	a.mu.Unlock()
	if err != nil || r.Facts != 1 {
		t.Fatalf("forget while the App's lock is held: %+v, %v; want it done", r, err)
	}
}

// startWithAFact starts an App in which alice has one fact, and a client of
// it.
func startWithAFact(t *testing.T) (*App, *events.Client) {
	t.Helper()
	a := startTestApp(t, nil)
	client := events.NewClient(a.nc, a.cfg.Prefix)
	if _, err := client.SetFact(context.Background(), "alice", "city", "Porto"); err != nil {
		t.Fatal(err)
	}
	return a, client
}

// A serve told not to migrate (--migrate=false: a rolling upgrade whose
// migrations an operator applies once) refuses a database with migrations
// pending, naming them, and applies none; once they are applied it
// starts. Before, every serve migrated at start, the first new pod of a
// rolling upgrade running any table rewrite.
func TestStartWithoutMigratingRefusesPendingMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t)
	unmigrated(t, &cfg)
	cfg.NoMigrate = true
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	var pending *PendingMigrationsError
	if err := a.Start(ctx); !errors.As(err, &pending) || len(pending.Pending.Memoryd) == 0 || !strings.Contains(err.Error(), "001_") ||
		!strings.Contains(err.Error(), "the database holds no memoryd schema yet") || strings.Contains(err.Error(), "002_") {
		t.Fatalf("start without migrating on a fresh schema: %v; want it said that the database has no schema, the first and last migrations named", err)
	}
	if p, err := a.PendingMigrations(ctx); err != nil || len(p.Memoryd) != len(pending.Pending.Memoryd) {
		t.Fatalf("after the refusal: %+v, %v; want nothing applied", p, err)
	}
	if _, err := a.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := a.PendingMigrations(ctx); err != nil || !p.Empty() {
		t.Fatalf("after migrate: %+v, %v", p, err)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	if err := b.Start(ctx); err != nil {
		t.Fatalf("start without migrating on a migrated database: %v", err)
	}
}

// loggedRefusal reports whether logs (JSON lines) hold a warning that a
// request to endpoint was refused for a newer migration, 9999.
func loggedRefusal(logs, endpoint string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var l struct{ Level, Msg, Endpoint, Error string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Level == "WARN" && l.Endpoint == endpoint &&
			strings.HasPrefix(l.Msg, "request refused") && strings.Contains(l.Error, "[9999]") {
			return true
		}
	}
	return false
}

// replay and embed told not to migrate (--migrate=false, the setting a
// rolling upgrade gives every process) refuse a database with migrations
// pending and apply none, as serve does. Before, they migrated all the
// same: an operator's walk ran `memoryd replay --migrate=false` against a
// database of the previous release and found migration 073 applied.
func TestReplayAndEmbedWithoutMigratingRefusePendingMigrations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := embeddingtest.New(t)
	a := startTestApp(t, nil)
	publishAndWait(t, a, "alice", events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: time.Now().UTC()})
	for _, c := range []struct {
		name string
		run  func(*App) error
	}{
		{"replay", func(b *App) error { _, err := b.Replay(ctx, ReplayOptions{}); return err }},
		{"embed", func(b *App) error { _, err := b.EmbedBackfill(ctx, EmbedOptions{}); return err }},
	} {
		cfg := a.cfg
		unmigrated(t, &cfg)
		cfg.NoMigrate = true
		cfg.Embed.BaseURL, cfg.Embed.Model = srv.URL, "m1"
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Stop(context.Background()) })
		var pending *PendingMigrationsError
		if err := c.run(b); !errors.As(err, &pending) {
			t.Errorf("%s with --migrate=false on an unmigrated database: %v; want it refused, the pending migrations named", c.name, err)
		}
		if p, err := b.PendingMigrations(ctx); err != nil || len(p.Memoryd) == 0 {
			t.Errorf("%s with --migrate=false: pending after it %+v, %v; want nothing applied", c.name, p, err)
		}
	}
}
