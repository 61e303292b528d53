package extractor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"
)

// A connection cut mid-request is told apart from a server that went down
// with the request (Error.Crashed) by connecting to the server again right
// away: a process that died closed its listener with its connections (a
// supervisor restarts it seconds or minutes later), one that only dropped
// the connection (an idle timeout, a balancer) still accepts. It dials up
// to crashDials times, crashDialGap apart (the listener may close just
// after the connections), each bounded by crashDialTimeout.
const (
	crashDials       = 3
	crashDialGap     = 20 * time.Millisecond
	crashDialTimeout = time.Second
)

// refusesConnections reports whether the model server's address refuses a
// TCP connection now (refused, or its host unreachable), within dials
// tries. It sends nothing: a connection
// made is closed at once. False when the requests go through a proxy
// (HTTP_PROXY, HTTPS_PROXY): the cut may be the proxy's, and the server's
// address, dialled without it, may refuse this host whatever the server
// does (a firewall only the proxy passes).
func (l *LLM) refusesConnections(ctx context.Context, dials int) bool {
	u, err := url.Parse(l.cfg.BaseURL)
	if err != nil || u.Host == "" || l.proxied(u) {
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
	d := net.Dialer{Timeout: crashDialTimeout}
	for i := range dials {
		if i > 0 && sleepCtx(ctx, crashDialGap) != nil {
			return false
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
		// A dial that timed out (one lost SYN outlasts crashDialTimeout)
		// or a name that did not resolve says nothing of the server:
		// tried again, and taken for a crash only if refused. Before, one
		// such dial made the cut a crash, and two failed a turn for good.
	}
	return false
}

// RefusesConnections reports whether the model server's address refuses
// a TCP connection now (refusesConnections, one dial of at most
// crashDialTimeout): a server down, restarting after a crash. The worker
// asks it before waking jobs whose requests would only meet it down. One
// dial, not crashDials: no request was just cut, so no listener may be
// closing just after its connections, and a wake of a server that
// accepts waits one connection's time, not crashDialGap more.
func (l *LLM) RefusesConnections(ctx context.Context) bool { return l.refusesConnections(ctx, 1) }

// proxied reports whether requests to u go through a proxy, as far as the
// HTTP client's transport says (an *http.Transport's Proxy).
func (l *LLM) proxied(u *url.URL) bool {
	rt := l.cfg.HTTPClient.Transport
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

type aloneKey struct{}

// Alone returns ctx marked so that an [LLM]'s request made with it is
// sent alone: it waits for every request of the LLM in flight to end and
// holds the others back until it has its answer (it takes every
// MaxConcurrency slot, within the same bound as a wait for one). A
// caller asks it for an input the server went down with before
// ([IsCrashed]): a crash cuts every request in flight, and only one sent
// alone tells whether that input brings the server down.
func Alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

func alone(ctx context.Context) bool { v, _ := ctx.Value(aloneKey{}).(bool); return v }
