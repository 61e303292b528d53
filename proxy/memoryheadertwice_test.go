package proxy_test

import (
	"net/http"
	"testing"

	"github.com/memoryd/memoryd/proxy"
)

// TestMemoryHeaderTwice: X-Memory sent twice is a 400 whatever the order,
// as the body field given twice is: only the first line was read, so "on"
// then "off" was enriched and remembered, from a client that sent its
// opt-out (a walk with curl, two header lines).
func TestMemoryHeaderTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	auth := "Bearer " + e.keys["alice"]
	for _, vs := range [][2]string{{"on", "off"}, {"off", "on"}, {"off", "off"}} {
		if code := e.post(t, "Authorization", auth, proxy.MemoryHeader, vs[0], proxy.MemoryHeader, vs[1]); code != http.StatusBadRequest {
			t.Errorf("X-Memory %q then %q: %d, want 400", vs[0], vs[1], code)
		}
	}
	e.stop()
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Errorf("%d turns published, want 0", n)
	}
	e.up.mu.Lock()
	defer e.up.mu.Unlock()
	if len(e.up.requests) != 0 {
		t.Errorf("the upstream got %d requests, want 0", len(e.up.requests))
	}
}
