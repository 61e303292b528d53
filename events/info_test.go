package events_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// InfoContext gives an info request events.InfoTimeout only on a server
// that answers info requests after the others (2.11 and later): on 2.9.10
// a server without JetStream for the account answers nothing, and the 2
// minutes kept `memoryd serve` and `publish` that long before they said so
// (cmd/memoryd.TestServeExplainsAnAccountWithoutServerJetStream: 120 s,
// 5 s with the gate). A deadline of the caller's own is kept.
func TestInfoContextOnlyOnServersThatDeferInfo(t *testing.T) {
	t.Parallel()
	deadline := func(nc jetstream.JetStream, ctx context.Context) (time.Duration, bool) {
		ictx, cancel := events.InfoContext(ctx, nc)
		defer cancel()
		d, ok := ictx.Deadline()
		return time.Until(d), ok
	}
	old, err := jetstream.New(eventstest.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	newer, err := jetstream.New(eventstest.StartRelease(t, eventstest.ReleaseNewest).Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	if v := old.Conn().ConnectedServerVersion(); !strings.HasPrefix(v, "2.9.") && !strings.HasPrefix(v, "2.10.") {
		t.Logf("the test server is %s, which defers info requests: the older server's case is not checked", v)
	} else if _, ok := deadline(old, context.Background()); ok {
		t.Errorf("on %s InfoContext set a deadline; want the JetStream context's default", v)
	}
	if d, ok := deadline(newer, context.Background()); !ok || d <= time.Minute {
		t.Errorf("on %s InfoContext's deadline is %v away (set: %v); want events.InfoTimeout", newer.Conn().ConnectedServerVersion(), d, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if d, ok := deadline(newer, ctx); !ok || d > time.Second {
		t.Errorf("a deadline of the caller's own (1 s) became %v away", d)
	}
}
