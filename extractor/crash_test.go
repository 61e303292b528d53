package extractor

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// cutter accepts connections and closes each once a request's head has
// come, answering nothing: a server (or a proxy) that cut the request.
// With down, it closes its listener first: a server that went down with
// the request.
func cutter(t *testing.T, down bool) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				if down {
					_ = ln.Close()
				}
			}()
		}
	}()
	return ln
}

// refusedAddr is an address of this host nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestCutThroughAProxyIsNotACrash: a request sent through an HTTP proxy
// (HTTP_PROXY, HTTPS_PROXY) that the proxy cuts says nothing of the model
// server, and neither does a connection to the server's address made
// without the proxy (refused or dropped by a firewall that only the proxy
// passes, a name only the proxy resolves): it is not taken for a crash the
// request brought about (IsCrashed). Before, every cut through such a
// proxy was, and a turn cut twice (a proxy's read timeout on a slow
// model) failed for good as one that crashes the server.
func TestCutThroughAProxyIsNotACrash(t *testing.T) {
	proxy := cutter(t, false)
	proxyURL, err := url.Parse("http://" + proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLLM(LLMConfig{BaseURL: "http://" + refusedAddr(t) + "/v1", Model: "m", MaxProbeGap: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Extract(context.Background(), testInput("I'm Ana"))
	if err == nil || IsUnreachable(err) || IsCrashed(err) {
		t.Fatalf("Extract through a proxy that cut the request: %v (crashed %v, unreachable %v); want a connection error, neither",
			err, IsCrashed(err), IsUnreachable(err))
	}

	// The control: the same cut by the server itself, its address then
	// refusing connections, is a crash.
	srv := cutter(t, true)
	l, err = NewLLM(LLMConfig{BaseURL: "http://" + srv.Addr().String() + "/v1", Model: "m", MaxProbeGap: -1,
		HTTPClient: &http.Client{Transport: &http.Transport{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = l.Extract(context.Background(), testInput("I'm Ana")); !IsCrashed(err) {
		t.Fatalf("Extract cut by a server that then refuses connections: %v; want it crashed", err)
	}
}
