package agenttools_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestWriteToolTimedOutSaysItMayHaveBeenDone: set_fact whose reply does
// not come within the tool's timeout (the facts table locked by another
// transaction) is a tool error that says the fact may have been set, as
// it then is once the lock goes (memoryd goes on with a request its
// requester stopped waiting for), and how to check. Before, it read
// "memory is unavailable: memoryd did not reply in time", as a read's
// timeout does, which a model takes for nothing done.
func TestWriteToolTimedOutSaysItMayHaveBeenDone(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: st, Prefix: prefix, Timeout: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop(context.Background()) })
	client := events.NewClient(nc, prefix)
	url := serveHTTPConfig(t, agenttools.Config{Client: client, Timeout: time.Second,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(slog.DiscardHandler)})
	s := mustConnect(t, url, "alice-key")

	ctx := context.Background()
	release := storetest.LockTable(t, st, "facts")
	msg := toolError(t, s, "set_fact", map[string]any{"key": "location", "value": "Lisbon"})
	release()
	eventstest.Eventually(t, "the timed-out set_fact to be done", 30*time.Second, func() (bool, string) {
		f, err := client.GetFact(ctx, "alice", "location")
		return err == nil && f.Value == "Lisbon", f.Value
	})
	if !strings.Contains(msg, "may have been made") || !strings.Contains(msg, "get_fact") {
		t.Errorf("set_fact timed out, and then done: %q, want it to say the fact may have been set", msg)
	}
}
