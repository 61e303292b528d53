package modelerr

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// RefusesConnections reports whether the address of the server at baseURL
// refuses a TCP connection now (refused, or its host unreachable), within
// dials tries gap apart, each bounded by timeout: a server down, a
// supervisor restarting it after a crash. It sends nothing: a connection
// made is closed at once. False when client's requests to it go through a
// proxy (HTTP_PROXY, HTTPS_PROXY; a nil client is http.DefaultClient): the
// server's address, dialled without it, may refuse this host whatever the
// server does (a firewall only the proxy passes). The LLM client
// (extractor) and the embeddings client (embedding) ask it alike.
func RefusesConnections(ctx context.Context, baseURL string, client *http.Client, dials int, gap, timeout time.Duration) bool {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || proxied(client, u) {
		return false
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	d := net.Dialer{Timeout: timeout}
	for i := range dials {
		if i > 0 {
			t := time.NewTimer(gap)
			select {
			case <-ctx.Done():
				t.Stop()
				return false
			case <-t.C:
			}
		}
		c, err := d.DialContext(ctx, "tcp", host)
		if err == nil {
			_ = c.Close()
			continue
		}
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) {
			return true
		}
		// A dial that timed out (one lost SYN outlasts timeout) or a name
		// that did not resolve says nothing of the server: tried again,
		// and taken for a refusal only if refused. Before, one such dial
		// made the extractor's cut a crash, and two failed a turn for good.
	}
	return false
}

// proxied reports whether client's requests to u go through a proxy, as
// far as its transport says (an *http.Transport's Proxy).
func proxied(client *http.Client, u *url.URL) bool {
	var rt http.RoundTripper
	if client != nil {
		rt = client.Transport
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok || t.Proxy == nil {
		return false
	}
	p, err := t.Proxy(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}})
	return err != nil || p != nil
}
