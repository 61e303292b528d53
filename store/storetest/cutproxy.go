package storetest

import (
	"io"
	"net"
	neturl "net/url"
	"sync"
	"testing"
)

// CutProxy forwards connections to a Postgres server until Cut, which
// resets (RST) the clients' sides of the connections and closes new ones
// at once (pgx's cancel request after a read error among them) until
// Resume, keeping the server's sides open: the server goes on with what
// it was sent, as beyond a network that lost the connections. A commit
// cut so may have been done.
type CutProxy struct {
	url string

	mu      sync.Mutex
	isCut   bool
	clients []net.Conn
}

// StartCutProxy starts a CutProxy to the server of the connection string
// target (a URL), stopped at the test's end.
func StartCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String()
	p := &CutProxy{url: u.String()}
	var (
		servers []net.Conn
		wg      sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.mu.Lock()
		for _, c := range servers {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			isCut := p.isCut
			p.mu.Unlock()
			if isCut {
				c.Close()
				continue
			}
			srv, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.clients, servers = append(p.clients, c), append(servers, srv)
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(srv, c) }()
			go func() {
				defer wg.Done()
				// Read on after the client's side is reset, its writes
				// dropped, so that the server is never held by it.
				_, _ = io.Copy(&dropAfterFail{c: c}, srv)
				c.Close()
			}()
		}
	}()
	return p
}

// URL is the connection string through the proxy.
func (p *CutProxy) URL() string { return p.url }

// Cut resets the clients' connections and refuses new ones until Resume.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = true
	for _, c := range p.clients {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		c.Close()
	}
	p.clients = nil
}

// Resume takes new connections again.
func (p *CutProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = false
}

// dropAfterFail writes to c until a write fails, then drops what follows.
type dropAfterFail struct {
	c      net.Conn
	failed bool
}

func (d *dropAfterFail) Write(b []byte) (int, error) {
	if !d.failed {
		if _, err := d.c.Write(b); err != nil {
			d.failed = true
		}
	}
	return len(b), nil
}
