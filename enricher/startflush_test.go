package enricher_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStartedServiceAnswersOtherConnections: once Start returns, a request
// sent on another connection is answered. The endpoints are subscriptions
// that nats.go puts in the connection's write buffer for its flusher to
// send later; a CLI test's request on its own connection reached the server
// before them and was told no one answers (TestFactsSetNamesTheCanonicalKey,
// 3 of 150 at load 15-20). Here the service's connection holds its writes,
// once connected, until it writes a PING, which only a flush sends (the
// client's periodic ping is an hour out): without Start's flush the
// subscriptions are still held when the request goes out.
func TestStartedServiceAnswersOtherConnections(t *testing.T) {
	t.Parallel()
	gate := &pingGate{}
	nc, err := nats.Connect(natsURL(), nats.Name(t.Name()), nats.SetCustomDialer(gate), nats.PingInterval(time.Hour))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", natsURL(), err)
	}
	t.Cleanup(nc.Close)
	gate.hold()
	h := start(t, storetest.New(t), func(c *enricher.Config) { c.Conn = nc })
	t.Cleanup(gate.open) // before the stop, when the test failed with the writes held

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := events.NewClient(connect(t), h.prefix).Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "hello"}); err != nil {
		t.Fatalf("enrich on another connection once Start returned: %v", err)
	}
}

// pingGate dials connections whose writes, once hold is called, are kept
// back until one of them carries a PING (a flush's), then sent in order.
type pingGate struct {
	mu      sync.Mutex
	conn    net.Conn
	holding bool
	held    []byte
}

func (g *pingGate) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conn = c
	g.mu.Unlock()
	return &gatedConn{Conn: c, g: g}, nil
}

func (g *pingGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holding = true
}

// open sends what is held and stops holding.
func (g *pingGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release()
}

func (g *pingGate) release() {
	g.holding = false
	if len(g.held) > 0 && g.conn != nil {
		_, _ = g.conn.Write(g.held)
	}
	g.held = nil
}

type gatedConn struct {
	net.Conn
	g *pingGate
}

func (c *gatedConn) Write(p []byte) (int, error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding {
		return c.Conn.Write(p)
	}
	g.held = append(g.held, p...)
	if bytes.Contains(g.held, []byte("PING\r\n")) {
		g.release()
	}
	return len(p), nil
}
