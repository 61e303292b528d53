package app

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// A database holds one prefix's memory: a memoryd of another prefix on it
// is refused at start, and so are its forget and replay (before: it served
// the first prefix's users as its own, and extraction jobs of one prefix's
// turns, run by the other's workers, published their changes under the
// other prefix). migrate --set-prefix moves the database on purpose.
func TestADatabaseServesOnePrefix(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	cfg := a.cfg
	cfg.Prefix, cfg.Stream = a.cfg.Prefix+"b", a.cfg.Stream+"_B"
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	var other *OtherPrefixError
	if err := b.Start(ctx); !errors.As(err, &other) || other.Recorded.Prefix != a.cfg.Prefix || other.Prefix != cfg.Prefix {
		t.Fatalf("serve of prefix %q on prefix %q's database: %v; want it refused, naming both", cfg.Prefix, a.cfg.Prefix, err)
	}
	if _, err := b.Forget(ctx, "alice"); !errors.As(err, &other) {
		t.Fatalf("forget through prefix %q on prefix %q's database: %v; want it refused", cfg.Prefix, a.cfg.Prefix, err)
	}
	// The other prefix's stream exists (a replay of a stream that does not
	// is refused before the database is opened).
	js, err := a.jetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: cfg.Prefix, Stream: cfg.Stream}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })
	if _, err := b.Replay(ctx, ReplayOptions{}); !errors.As(err, &other) {
		t.Fatalf("replay of prefix %q on prefix %q's database: %v; want it refused", cfg.Prefix, a.cfg.Prefix, err)
	}
	s, err := a.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(ctx, "alice"); err != nil || st.TurnsReceived != 1 {
		t.Fatalf("alice after the refused forget: %+v, %v; want her turn kept", st, err)
	}
	// Not while the first prefix's memoryd runs: it would go on under its
	// prefix (before, the move was made, exit 0, and the serve carried on).
	if _, _, err := b.SetDeployment(ctx); err == nil || !strings.Contains(err.Error(), "1 memoryd processes with workers are running") {
		t.Fatalf("migrate --set-prefix beside a running serve: %v; want it refused", err)
	}
	// Moved on purpose, with the first prefix's memoryd stopped.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if prev, had, err := b.SetDeployment(ctx); err != nil || !had || prev.Prefix != a.cfg.Prefix || prev.Stream != a.cfg.Stream {
		t.Fatalf("set-prefix: previous %+v (recorded %v), %v; want prefix %q, stream %s", prev, had, err, a.cfg.Prefix, a.cfg.Stream)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatalf("serve of prefix %q after migrate --set-prefix: %v", cfg.Prefix, err)
	}
}

// A serve that creates its database (a mistyped --database-url, which
// --create-database creates) beside a turn stream whose ingest consumer
// already acknowledged events is refused: it would take a share of the
// stream's new events from the memoryd recording them, and answer from an
// empty memory. A replay into it first makes it the deployment's. A
// database that existed, even empty (one upgraded from before migration
// 039 whose events were all opted out), is not refused.
func TestANewDatabaseOnAConsumedStreamIsRefused(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	b, cfg := onMissingDatabase(t, a)
	var fresh *NewDatabaseError
	if err := b.Start(ctx); !errors.As(err, &fresh) || fresh.Delivered == 0 || fresh.Stream != cfg.Stream {
		t.Fatalf("serve on a new database beside a consumed stream: %v; want it refused", err)
	}
	// Refused before it was created: the restart that follows a failed
	// start (systemd, Kubernetes) is refused too. Before, the database
	// stayed, and the restart served it.
	if missing, err := store.DatabaseMissing(ctx, cfg.Store); err != nil || !missing {
		t.Fatalf("after the refusal the database is missing: %v, %v; want it not created", missing, err)
	}
	restart, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restart.Stop(context.Background()) })
	if err := restart.Start(ctx); !errors.As(err, &fresh) {
		t.Fatalf("restart on the database a refused serve left: %v; want it refused", err)
	}
	// The first memoryd still gets every new event.
	publishAndWait(t, a, "alice", events.Turn{ID: "t2", UserID: "alice", UserMessage: "my cat is Tom", AssistantResponse: "ok", Timestamp: time.Now().UTC()})
	p, err := b.Replay(ctx, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Enqueued != 2 {
		t.Fatalf("replay into the new database read %+v; want alice's 2 turns", p)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatalf("serve on the database a replay filled: %v", err)
	}
}

// A serve on a new database is refused as soon as the stream's ingest
// consumer has delivered an event, acknowledged or not: the ack floor
// stays 0 while the stream's first event waits for its acknowledgement
// (recorded and not yet acknowledged, or redelivered after a crash), and
// the check that read it let a mistyped --database-url take a share of the
// stream from the memoryd recording it.
func TestANewDatabaseOnADeliveredStreamIsRefused(t *testing.T) {
	t.Parallel()
	a := startTestApp(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The ingest consumer exists; the memoryd that recorded through it is
	// stopped, so that the event below stays delivered and unacknowledged.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.NewPublisher(js, a.cfg.Prefix).Publish(ctx, events.Turn{ID: "t1", UserID: "alice",
		UserMessage: "my dog is Rex", AssistantResponse: "ok", Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, a.cfg.Stream, durableName(a.cfg.Worker.Durable))
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var taken int
	for range batch.Messages() {
		taken++ // delivered, left unacknowledged
	}
	if err := batch.Error(); err != nil || taken != 1 {
		t.Fatalf("fetched %d events: %v; want alice's one", taken, err)
	}
	if info, err := cons.Info(ctx); err != nil || info.AckFloor.Stream != 0 || info.Delivered.Stream == 0 {
		t.Fatalf("consumer before the start: %+v, %v; want an event delivered above an ack floor of 0", info, err)
	}
	b, cfg := onMissingDatabase(t, a)
	var fresh *NewDatabaseError
	if err := b.Start(ctx); !errors.As(err, &fresh) || fresh.Delivered == 0 || fresh.Stream != cfg.Stream {
		t.Fatalf("serve on a new database beside a stream with an event delivered: %v; want it refused", err)
	}
}

// An empty database that existed beside a consumed stream is served: only
// one the serve itself created is taken for a mistake.
func TestAnExistingEmptyDatabaseOnAConsumedStreamIsServed(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	cfg := a.cfg
	_, cfg.Store.URL = storetest.Schema(t)
	cfg.Store.URL += "&pool_max_conns=4"
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	if err := b.Start(ctx); err != nil {
		t.Fatalf("serve on an existing empty database beside a consumed stream: %v", err)
	}
}

// A replay --dry-run writes nothing: it does not create a missing database
// (before, it created and migrated it, then said nothing was written).
func TestADryRunReplayCreatesNoDatabase(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	b, cfg := onMissingDatabase(t, a)
	if _, err := b.Replay(ctx, ReplayOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("dry run on a missing database: %v; want it refused, naming the missing database", err)
	}
	if missing, err := store.DatabaseMissing(ctx, cfg.Store); err != nil || !missing {
		t.Fatalf("after a dry run the database is missing: %v, %v; want it not created", missing, err)
	}
}

// onMissingDatabase is a second App of a's prefix and stream (as edit,
// if any, changes them) on a database that does not exist, which it may
// create.
func onMissingDatabase(t *testing.T, a *App, edit ...func(*Config)) (*App, Config) {
	t.Helper()
	cfg := a.cfg
	for _, e := range edit {
		e(&cfg)
	}
	u, err := url.Parse(storetest.MissingDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// A parameter of the URL's query, which MEMORYD_TEST_DATABASE_URL may
	// not have: appended with "&" to one without, it named the database
	// ("t_...&pool_max_conns=4", created and never dropped).
	q := u.Query()
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	cfg.Store.URL = u.String()
	cfg.Store.CreateDatabase = true
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, cfg
}

// A replay whose --stream or --prefix is misspelt is refused before it
// opens the database: before, it created and migrated the database and
// claimed its deployment for the misspelt stream or prefix, then failed
// on the stream (an upgrade walk's typo migrated a production schema).
func TestAReplayOfAMisspeltStreamTouchesNoDatabase(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	for _, c := range []struct {
		name           string
		prefix, stream string
		want           string
	}{
		{"stream", a.cfg.Prefix, a.cfg.Stream + "_TYPO", "stream not found"},
		{"prefix", a.cfg.Prefix + "typo", a.cfg.Stream, "not the turns of prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, cfg := onMissingDatabase(t, a, func(cfg *Config) { cfg.Prefix, cfg.Stream = c.prefix, c.stream })
			for _, o := range []ReplayOptions{{}, {Reset: true}, {DryRun: true}} {
				if _, err := b.Replay(ctx, o); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "not opened or migrated") {
					t.Fatalf("replay %+v of stream %s, prefix %s: %v; want it refused for the stream (%q)", o, c.stream, c.prefix, err, c.want)
				}
			}
			if missing, err := store.DatabaseMissing(ctx, cfg.Store); err != nil || !missing {
				t.Fatalf("after the refused replays the database is missing: %v, %v; want it not created", missing, err)
			}
		})
	}
	// The right stream and prefix still replay (the check does not refuse
	// a stream memoryd made).
	b, _ := onMissingDatabase(t, a)
	if p, err := b.Replay(ctx, ReplayOptions{}); err != nil || p.Enqueued != 1 {
		t.Fatalf("replay of the right stream: %+v, %v; want alice's turn", p, err)
	}
}

// TestSubjectsOverlap: replay checks that the stream's subjects can hold
// the prefix's turns; "memory.turns.*" can (a user token is one token).
func TestSubjectsOverlap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"memory.turns.>", "memory.turns.>", true},
		{"memory.>", "memory.turns.>", true},
		{">", "memory.turns.>", true},
		{"*.turns.>", "memory.turns.>", true},
		{"memory.turns.*", "memory.turns.>", true},
		{"memoryx.turns.>", "memory.turns.>", false},
		{"memory.turns", "memory.turns.>", false},
		{"memory.turns.alice", "memory.turns.>", true},
		{"memory.facts.*", "memory.turns.>", false},
		{"memory.*", "memory.turns.>", false},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
	} {
		if got := subjectsOverlap(c.a, c.b); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := subjectsOverlap(c.b, c.a); got != c.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
}

// A stream that takes the turns from the turn stream (sources) while it
// captures other subjects of its own, an aggregate or a backup, holds the
// prefix's turns under their own subjects: the replay's stream check must
// not refuse it for its own subjects (before the check, such a replay read
// the turns back).
func TestAReplayOfASourcedStreamWithSubjectsOfItsOwn(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	js, err := a.jetStream()
	if err != nil {
		t.Fatal(err)
	}
	agg := a.cfg.Stream + "_AGG"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name:     agg,
		Subjects: []string{a.cfg.Prefix + "agg.>"},
		Sources:  []*jetstream.StreamSource{{Name: a.cfg.Stream}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), agg) })
	waitForAMessage(t, ctx, js, agg)
	b, _ := onMissingDatabase(t, a, func(cfg *Config) { cfg.Stream = agg })
	if p, err := b.Replay(ctx, ReplayOptions{}); err != nil || p.Enqueued != 1 {
		t.Fatalf("replay of stream %s, which sources %s: %+v, %v; want alice's turn", agg, a.cfg.Stream, p, err)
	}
}

// waitForAMessage waits (up to 10 s) for stream name to hold a message:
// a sourced stream copies its sources' messages after it is created.
func waitForAMessage(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) {
	t.Helper()
	c, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(jetstream.FetchMaxWait(10 * time.Second)); err != nil {
		t.Fatalf("stream %s holds no message: %v", name, err)
	}
}

// A replay of a turn stream made by hand with work-queue retention (ingest
// empties it) is refused naming the retention, before it opens the
// database: JetStream refused its ordered consumer with "consumer in pull
// mode requires ack policy" (a first-start walk).
func TestAReplayOfAWorkQueueStreamSaysSo(t *testing.T) {
	t.Parallel()
	a, ctx := startWithAlice(t)
	js, err := jetstream.New(a.nc)
	if err != nil {
		t.Fatal(err)
	}
	prefix, stream := a.cfg.Prefix+"wq", a.cfg.Stream+"_WQ"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{events.TurnSubjects(prefix)}, Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	b, cfg := onMissingDatabase(t, a, func(cfg *Config) { cfg.Prefix, cfg.Stream = prefix, stream })
	if _, err := b.Replay(ctx, ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "its retention is WorkQueue") {
		t.Fatalf("replay of a work-queue stream: %v; want it refused naming the retention", err)
	}
	if missing, err := store.DatabaseMissing(ctx, cfg.Store); err != nil || !missing {
		t.Fatalf("after the refused replay the database is missing: %v, %v; want it not created", missing, err)
	}
}
