package app

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// dropper forwards one TCP connection to a NATS server until armed; armed,
// it cuts the connection at the client's next bytes (a health check's
// ping) and takes no new one, so the client stays reconnecting.
type dropper struct {
	ln    net.Listener
	armed atomic.Bool
}

func newDropper(t *testing.T, target string) *dropper {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			_ = c.Close()
			return
		}
		go func() { _, _ = io.Copy(c, u); _ = c.Close() }()
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if d.armed.Load() {
				_ = ln.Close()
				_ = c.Close()
				_ = u.Close()
				return
			}
			if n > 0 {
				if _, werr := u.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				_ = u.Close()
				return
			}
		}
	}()
	return d
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
	d := newDropper(t, target.Host)
	a := startTestApp(t, func(c *Config) {
		c.NATS.URL = "nats://" + d.ln.Addr().String()
		c.Role = RoleEnrich
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h := a.Health(ctx); h["nats"] != "ok" {
		t.Fatalf("before the drop: /readyz checks %v, want nats ok", h)
	}
	d.armed.Store(true)
	h := a.Health(ctx)
	if !strings.HasPrefix(h["nats"], "not connected: ") || strings.Contains(h["nats"], "connected, but") {
		t.Fatalf("connection lost during the ping: nats check %q, want it to say not connected", h["nats"])
	}
}
