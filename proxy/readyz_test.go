package proxy_test

import (
	"strconv"
	"testing"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/proxy"
)

// TestReadyzSaysWhenTheServerDoesNotAnswer: /readyz makes a round trip to
// the NATS server, so a connection that is up as the client knows it but
// carries nothing (a hung server; a lost host or a partition look the
// same) reads 503, not ok, until the connection's pings drop it (a
// dependency walk: serve's /readyz said ok for 6 minutes; the proxy's
// checked only that the client thought itself connected).
func TestReadyzSaysWhenTheServerDoesNotAnswer(t *testing.T) {
	t.Parallel()
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", t.TempDir()}
	})
	e := newEnv(t, func(c *proxy.Config) { c.Conn = srv.Conn(t) })
	srv.CheckReadyzFollowsPause(t, "http://"+e.proxy.Addr()+"/readyz")
}
