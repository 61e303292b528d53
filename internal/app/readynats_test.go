package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestReadinessWithNATSDownNamesItForTheConsumer: while the NATS server
// is down, /readyz's consumer check says the lookup needs NATS, at once,
// instead of waiting out the check's time for a JetStream request that
// cannot be sent and saying "context deadline exceeded" (an operator's
// walk: each /readyz took 2 s through a 10 s NATS outage, the consumer
// check reading only "context deadline exceeded").
func TestReadinessWithNATSDownNamesItForTheConsumer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir}
	})
	a := startTestApp(t, func(c *Config) { c.NATS.URL = srv.URL })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h := a.Health(ctx); h["consumer"] != "ok" || h["nats"] != "ok" {
		t.Fatalf("readiness before the outage: %v", h)
	}

	srv.Stop(t)
	// Started again before the app's cleanup stops it: its stop waits on a
	// connection that is down.
	defer srv.Start(t)
	eventstest.Eventually(t, "the connection lost", 20*time.Second, func() (bool, string) {
		return !a.nc.IsConnected(), a.nc.Status().String()
	})
	h := a.Health(ctx)
	if !strings.HasPrefix(h["nats"], "not connected") {
		t.Fatalf("nats check with the server down: %q", h["nats"])
	}
	if c := h["consumer"]; !strings.Contains(c, "NATS is not connected") {
		t.Errorf("consumer check with the server down: %q; want it to say NATS is not connected", c)
	}
}
