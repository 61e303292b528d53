package app

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// silencer forwards TCP connections to a NATS server until silence is
// called: from then on the connections it holds forward nothing and stay
// open, as a connection does whose server's host was lost, or across a
// partition. Connections accepted after it forward again. Once drop is
// called, a connection is cut at the client's next bytes, and none is
// taken again: the client stays reconnecting.
type silencer struct {
	ln       net.Listener
	mu       sync.Mutex
	gen      int
	dropped  bool
	accepted chan struct{}
}

func newSilencer(t *testing.T, target string) *silencer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silencer{ln: ln, accepted: make(chan struct{}, 16)}
	var conns []net.Conn
	var connsMu sync.Mutex
	accepting := make(chan struct{})
	// The listener first, and the accepting goroutine gone, then the
	// connections: one accepted as they were closed would be left open,
	// its pipes running past the test.
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepting
		connsMu.Lock()
		defer connsMu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		defer close(accepting)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			connsMu.Lock()
			conns = append(conns, c, u)
			connsMu.Unlock()
			s.mu.Lock()
			gen := s.gen
			s.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					s.mu.Lock()
					silenced, dropped := s.gen != gen, s.dropped
					s.mu.Unlock()
					if dropped {
						_ = ln.Close()
						_ = src.Close()
						_ = dst.Close()
						return
					}
					if silenced {
						// Read on, forward nothing, close nothing: the
						// test's cleanup closes them.
						_, _ = io.Copy(io.Discard, src)
						return
					}
					if n > 0 {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						_ = dst.Close()
						return
					}
				}
			}
			go pipe(u, c)
			go pipe(c, u)
			select {
			case s.accepted <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

func (s *silencer) url() string { return "nats://" + s.ln.Addr().String() }

// silence stops the connections made so far from forwarding anything.
func (s *silencer) silence() {
	s.mu.Lock()
	s.gen++
	s.mu.Unlock()
}

// drop cuts every connection at its next bytes and takes no new one.
func (s *silencer) drop() {
	s.mu.Lock()
	s.dropped = true
	s.mu.Unlock()
}

// TestNATSServerThatStopsAnsweringIsSeenAndLeft: a serve whose NATS
// connection stops carrying anything without closing (the server's host
// lost, a partition) says so on /readyz, and reconnects within its ping
// bound, answering enrich again. Before: /readyz said "nats":"ok" and the
// process answered nothing for the 4 to 6 minutes nats.go's default pings
// took to drop the connection (a dependency walk: 40% of enrich requests
// timing out beside a healthy replica, for minutes).
func TestNATSServerThatStopsAnsweringIsSeenAndLeft(t *testing.T) {
	t.Parallel()
	target, err := url.Parse(eventstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	sil := newSilencer(t, target.Host)
	a := startTestApp(t, func(c *Config) {
		c.NATS.URL = sil.url()
		c.NATS.PingInterval = time.Second // the silence found in 3 s, not 30
		c.Role = RoleEnrich
	})
	<-sil.accepted // the process's one connection
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if h := a.Health(ctx); h["nats"] != "ok" {
		t.Fatalf("before the silence: /readyz checks %v, want nats ok", h)
	}

	sil.silence()
	if h := a.Health(ctx); h["nats"] == "ok" || !strings.Contains(h["nats"], "does not answer") {
		t.Errorf("connection silenced: /readyz nats check %q, want it to say the server does not answer", h["nats"])
	}

	// The process leaves the silent connection for a new one (through
	// the silencer, which forwards new connections) and answers again.
	select {
	case <-sil.accepted:
	case <-ctx.Done():
		t.Fatalf("no new connection within 2 minutes of the silence: the process kept the silent one")
	}
	client := events.NewClient(eventstest.Conn(t), a.cfg.Prefix)
	// The server may still hold the silent connection's subscriptions
	// (it finds the connection dead by its own pings, later) and give
	// them a request now and then: each request has its own deadline.
	err = poll(ctx, 100*time.Millisecond, func() (bool, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		r, err := client.Enrich(rctx, events.EnrichRequest{UserID: "alice", Message: "anything?"})
		return err == nil && !r.Degraded, nil
	})
	if err != nil {
		t.Fatalf("enrich after the reconnect: %v", err)
	}
	if h := a.Health(ctx); h["nats"] != "ok" {
		t.Errorf("after the reconnect: /readyz checks %v, want nats ok", h)
	}
}

// TestNATSCheckOfAConnectionLostDuringItsPing: a connection lost while
// /readyz's ping is in flight is told as not connected, with its status,
// not as "connected, but the server does not answer: ... connection
// closed" (an ops walk's /readyz said both at once).
func TestNATSCheckOfAConnectionLostDuringItsPing(t *testing.T) {
	t.Parallel()
	target, err := url.Parse(eventstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	d := newSilencer(t, target.Host)
	a := startTestApp(t, func(c *Config) {
		c.NATS.URL = d.url()
		c.Role = RoleEnrich
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h := a.Health(ctx); h["nats"] != "ok" {
		t.Fatalf("before the drop: /readyz checks %v, want nats ok", h)
	}
	d.drop()
	h := a.Health(ctx)
	if !strings.HasPrefix(h["nats"], "not connected: ") || strings.Contains(h["nats"], "connected, but") {
		t.Fatalf("connection lost during the ping: nats check %q, want it to say not connected", h["nats"])
	}
}
