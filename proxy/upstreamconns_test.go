package proxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memoryd/memoryd/proxy"
)

// TestUpstreamConnectionsAreReused: the requests of a wave of concurrent
// chats reuse the connections the wave before opened. The default
// Transport's clone kept 2 idle connections per host, and a proxy talks to
// one host: a walk's 60 requests in waves of 20 opened 46 connections, a
// TLS handshake each against an HTTPS upstream.
func TestUpstreamConnectionsAreReused(t *testing.T) {
	t.Parallel()
	const wave = 8
	var (
		mu      sync.Mutex
		conns   = map[string]bool{} // the upstream's clients, by address
		arrived int
		all     = make(chan struct{})
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		// Each wave's requests are held until all of them have arrived,
		// so that they are in flight at once, each on a connection.
		arrived++
		if arrived%wave == 0 {
			close(all)
		}
		gate := all
		mu.Unlock()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, func(c *proxy.Config) { c.Upstream = up.URL + "/v1" })
	for w := range 2 {
		var wg sync.WaitGroup
		errs := make(chan error, wave)
		for range wave {
			wg.Go(func() { errs <- chat(e.url, e.keys["alice"]) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("wave %d: %v", w, err)
			}
		}
		mu.Lock()
		all = make(chan struct{})
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) > wave {
		t.Errorf("2 waves of %d concurrent chats opened %d upstream connections; want the second wave to reuse the first's %d", wave, len(conns), wave)
	}
}

// chat posts a chat request with key, memory off, and reads its reply.
func chat(url, key string) error {
	req, err := http.NewRequest(http.MethodPost, url+"/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Memory", "off")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s: %s", resp.Status, body)
	}
	return nil
}

// TestUpstreamNotReachedSaysSo: an upstream no connection reaches is a 502
// saying so, apart from one that closed the connection it took.
func TestUpstreamNotReachedSaysSo(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close() // its port refuses connections from now on
	e := newEnv(t, func(c *proxy.Config) { c.Upstream = url + "/v1" })
	err := chat(e.url, e.keys["alice"])
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("a chat to an upstream not listening: %v; want a 502 saying it could not be reached", err)
	}
}

// An upstream whose TLS handshake fails (a certificate not trusted, an
// https URL to a plain-HTTP port) did not close a connection unanswered:
// the 502 does not say it did, which sends an operator looking for a
// crashed server where the URL or the certificate is at fault.
func TestUpstreamTLSFailureIsNotAClose(t *testing.T) {
	t.Parallel()
	untrusted := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(untrusted.Close)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)
	for _, upstream := range []string{untrusted.URL, strings.Replace(plain.URL, "http://", "https://", 1)} {
		e := newEnv(t, func(c *proxy.Config) { c.Upstream = upstream + "/v1" })
		err := chat(e.url, e.keys["alice"])
		if err == nil || !strings.Contains(err.Error(), "502") || strings.Contains(err.Error(), "closed the connection") {
			t.Errorf("a chat to %s: %v; want a 502 not saying the connection was closed", upstream, err)
		}
	}
}
