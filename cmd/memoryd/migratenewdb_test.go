package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestMigrateRefusesANewDatabaseBesideAConsumedStream: migrate creates a
// missing database, as the missing-database message advises, and a serve
// takes an existing database for the deployment's: a database migrate
// created for a mistyped --database-url, beside a stream whose ingest
// consumer had delivered events, was served by the next serve, which took
// 5 of 10 turns from the memoryd recording them (a review, with the
// binary), where serve --create-database on the same URL is refused. It is
// refused as serve's is, and not created.
func TestMigrateRefusesANewDatabaseBesideAConsumedStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: worker.DefaultDurable,
		AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: events.TurnSubjects(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.NewPublisher(js, prefix).Publish(ctx, events.Turn{ID: "t1", UserID: "alice",
		UserMessage: "my dog is Rex", AssistantResponse: "ok", Timestamp: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		_ = m.Ack() // recorded by the memoryd that serves the stream
	}
	u, err := url.Parse(storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/memoryd_missing_" + strings.ToLower(t.Name())
	out, errOut, code := runArgs(ctx, "migrate", "--database-url", u.String(), "--nats-url", eventstest.URL(),
		"--prefix", prefix, "--stream", stream)
	missing, err := store.DatabaseMissing(ctx, store.Config{URL: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	if !missing {
		t.Cleanup(func() {
			admin := *u
			admin.Path = "/postgres"
			conn, err := pgx.Connect(context.Background(), admin.String())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close(context.Background())
			if _, err := conn.Exec(context.Background(), `DROP DATABASE IF EXISTS `+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+` WITH (FORCE)`); err != nil {
				t.Error(err)
			}
		})
	}
	if i := strings.LastIndex(errOut, "applied migration"); i >= 0 {
		errOut = "..." + errOut[i:] // the migrations' log, cut to its last line
	}
	if code == 0 || !missing || !strings.Contains(errOut, "has delivered its events") {
		t.Fatalf("migrate of a missing database beside a consumed stream: exit %d, database created %v, stdout %q, stderr %q; want it refused, not created",
			code, !missing, out, errOut)
	}
}
