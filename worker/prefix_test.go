package worker_test

import (
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// A memoryd started with another --prefix on a stream whose ingest
// consumer serves a running memoryd refuses to start, and changes neither
// the consumer nor the stream: updating the shared durable's filter moved
// the running processes onto the other prefix's subjects, and the events
// they passed over meanwhile were never recorded.
func TestStartRefusesAnotherPrefixsConsumer(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	other, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(),
		Logger: slog.New(slog.DiscardHandler), Prefix: e.prefix + "x", Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(e.ctx); !errors.Is(err, worker.ErrConsumerOfAnotherPrefix) {
		_ = other.Stop(e.ctx)
		t.Fatalf("start with another prefix on the same stream: %v; want ErrConsumerOfAnotherPrefix", err)
	}
	s, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, []string{events.TurnSubjects(e.prefix)}) {
		t.Errorf("stream subjects after the refused start: %v", got)
	}
	c, err := e.js.Consumer(e.ctx, e.stream, worker.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.FilterSubject; got != events.TurnSubjects(e.prefix) {
		t.Errorf("consumer filter after the refused start: %q", got)
	}
	// The running worker still records its prefix's turns.
	e.publish(events.Turn{ID: "p1", UserID: "alice", UserMessage: "I live in Oslo", Timestamp: t0})
	e.waitDone(1)
}
