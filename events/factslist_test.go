package events_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestListFactsRefusesAPageThatStartsOver: during a rolling upgrade a
// page after the first may reach a memoryd older than paged facts.list,
// which ignores "after" and answers the whole list again. ListFacts says
// so instead of returning facts twice.
func TestListFactsRefusesAPageThatStartsOver(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a := events.Fact{Key: "a", Value: "1", SourceAt: t0.Add(3 * time.Hour)}
	b := events.Fact{Key: "b", Value: "2", SourceAt: t0.Add(2 * time.Hour)}
	c := events.Fact{Key: "c", Value: "3", SourceAt: t0.Add(time.Hour)}
	pages := []events.FactsReply{
		{Facts: []events.Fact{a, b}, Next: &events.FactCursor{SourceAt: b.SourceAt, Key: b.Key}},
		{Facts: []events.Fact{a, b, c}}, // the older memoryd: everything, no next
	}
	n := 0
	sub, err := nc.Subscribe(prefix+".facts.list.u", func(m *nats.Msg) {
		data, _ := json.Marshal(pages[min(n, len(pages)-1)])
		n++
		_ = m.Respond(data)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	facts, err := events.NewClient(nc, prefix).ListFacts(ctx, "u")
	if err == nil || !strings.Contains(err.Error(), "did not continue after it") {
		t.Fatalf("ListFacts over a page that starts over: %v, %v; want an error", facts, err)
	}
}
