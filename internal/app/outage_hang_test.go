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
)

// frozenProxy forwards TCP connections to target until freeze, after which
// it reads on but forwards nothing and closes nothing: a database that
// stops answering without a reset (a failover, a partition).
type frozenProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	frozen chan struct{}
}

func newFrozenProxy(t *testing.T, target string) *frozenProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frozenProxy{ln: ln, target: target, frozen: make(chan struct{})}
	t.Cleanup(p.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *frozenProxy) serve(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	copyUntilFrozen := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-p.frozen:
				_, _ = io.Copy(io.Discard, src) // swallow, answer nothing
				return
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	go copyUntilFrozen(s, c)
	go copyUntilFrozen(c, s)
}

func (p *frozenProxy) freeze() { close(p.frozen) }

// close ends every connection, both ends: the pool's connections fail at
// once (its Close waits for them), the server's sessions end.
func (p *frozenProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestWaitExtractedGivesUpOnAFrozenDatabase: a database that stops
// answering without closing its connections holds no check of the wait
// past its bound: the wait ends saying the database did not answer, not
// when the caller's context does (before: a check hung as long as the
// connection, with no deadline of its own).
func TestWaitExtractedGivesUpOnAFrozenDatabase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	u, err := url.Parse(cfg.Store.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := newFrozenProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	cfg.Store.URL = u.String()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = a.Stop(ctx)
	})
	ctx := context.Background()
	if err := a.Start(ctx); err != nil { // opens and migrates the store
		t.Fatal(err)
	}
	if err := a.WaitExtracted(ctx, nil, nil); err != nil { // nothing pending
		t.Fatal(err)
	}
	a.waitOutage, a.waitCheckTimeout = time.Second, 200*time.Millisecond
	p.freeze()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = a.WaitExtracted(wctx, nil, nil)
	if wctx.Err() != nil || err == nil || !strings.Contains(err.Error(), "database did not answer for 1s") {
		t.Fatalf("wait on a frozen database: %v (the caller's context: %v); want it given up after the bound", err, wctx.Err())
	}
}
