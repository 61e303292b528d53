package agenttools_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/memoryd/memoryd/agenttools"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestReadyzSaysWhenTheServerDoesNotAnswer: /readyz makes a round trip to
// the NATS server, so a connection that is up as the client knows it but
// carries nothing (a hung server; a lost host or a partition look the
// same) reads 503, not ok (a dependency walk: serve's /readyz said ok for
// 6 minutes; this one checked only that the client thought itself
// connected).
func TestReadyzSaysWhenTheServerDoesNotAnswer(t *testing.T) {
	t.Parallel()
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)}
	})
	url := serveHTTPConfig(t, agenttools.Config{Client: events.NewClient(srv.Conn(t), ""), Timeout: 10 * time.Second,
		Keys: keys{"alice-key": "alice"}, Logger: slog.New(slog.DiscardHandler)})
	srv.CheckReadyzFollowsPause(t, url+"/readyz")
}
