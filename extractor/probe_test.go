package extractor

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestDownServerIsProbedNotAskedByEveryJob: a server refusing the key
// (401) or down (503) is sent a probe now and then, not every request:
// 200 extractions in a row send a few dozen at most (200 before: a
// rotation walk counted 4,660 refused requests in 100 s). The requests
// held back fail as the probes do (unreachable; misconfigured for the
// key), so the worker waits for them alike; once a probe is answered,
// every request is sent again.
func TestDownServerIsProbedNotAskedByEveryJob(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		down          extractortest.Reply
		misconfigured bool
	}{
		"key refused":   {extractortest.Error(http.StatusUnauthorized, "invalid api key"), true},
		"loading model": {extractortest.Error(http.StatusServiceUnavailable, "loading model"), false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, c.down)
			l, err := NewLLM(LLMConfig{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			// The first fails and makes the server count as down; the
			// outage is then made a minute old (nothing is held back in
			// its first second).
			if _, err := l.Extract(context.Background(), testInput("I'm Ana")); !IsUnreachable(err) {
				t.Fatalf("first extraction: %v, want unreachable", err)
			}
			l.serverErrors.mu.Lock()
			l.serverErrors.downSince = l.serverErrors.downSince.Add(-time.Minute)
			l.serverErrors.probed = l.serverErrors.probed.Add(-time.Minute)
			l.serverErrors.mu.Unlock()
			const n = 200
			for i := range n {
				_, err := l.Extract(context.Background(), testInput(fmt.Sprintf("I'm Ana %d", i)))
				if !IsUnreachable(err) || IsMisconfigured(err) != c.misconfigured {
					t.Fatalf("extraction %d: %v (unreachable %v, misconfigured %v), want unreachable, misconfigured %v",
						i, err, IsUnreachable(err), IsMisconfigured(err), c.misconfigured)
				}
			}
			// One probe every 5 s (a quarter of the outage, capped): the
			// first of the n, and one more for each 5 s they take.
			if got := srv.Requests() - 1; got >= n/10 {
				t.Fatalf("%d extractions sent %d requests to a server that is down, want a probe now and then", n, got)
			}
			t.Logf("%d extractions sent %d requests", n, srv.Requests()-1)
		})
	}
}
