package events_test

import (
	"context"
	"strconv"
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

// While the connection is down (a NATS server dead or restarting: nats.go
// reconnects for ever), the server's version cannot be read
// (ConnectedServerVersion is empty): InfoContext keeps nats.go's 5 s, as
// before it. Taken for a 2.11+ server, every info request on a user's path
// (a forget, a replay, a start) waited 2 minutes for a server that was
// gone, whatever its version.
func TestInfoContextKeepsTheDefaultWhileDisconnected(t *testing.T) {
	t.Parallel()
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir()}
	})
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	eventstest.Eventually(t, "the connection down", 10*time.Second, func() (bool, string) {
		return !js.Conn().IsConnected(), js.Conn().Status().String()
	})
	ictx, cancel := events.InfoContext(context.Background(), js)
	defer cancel()
	if d, ok := ictx.Deadline(); ok {
		t.Errorf("disconnected, InfoContext set a deadline %v away; want the JetStream context's default (5 s)", time.Until(d).Round(time.Second))
	}
}
