package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/proxy"
)

// TestStopPastItsDeadlineCutsTheRequestsInFlight: a Stop whose deadline
// passes with a stream in flight cuts it (the client's response is cut,
// the upstream request cancelled, nothing is published) and says so.
// Before, Stop returned "turns still being published" (none was) while the
// stream went on after it, until the upstream ended it, and then published
// its turn on a NATS connection the caller had closed.
func TestStopPastItsDeadlineCutsTheRequestsInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.up.setMode("stall") // a first chunk, then nothing until cancelled
	req, _ := http.NewRequest(http.MethodPost, e.url+"/chat/completions", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"I live in Oslo"}]}`))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if _, err := body.ReadString('\n'); err != nil { // the first chunk: the stream is in flight
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	err = e.proxy.Stop(ctx)
	if !errors.Is(err, proxy.ErrRequestsCut) || !strings.Contains(err.Error(), "stop: 1 requests still in flight were cut") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop past its deadline with a stream in flight: %v; want the requests in flight named as cut", err)
	}
	eventstest.Eventually(t, "the upstream request to be cancelled", 10*time.Second, func() (bool, string) {
		e.up.mu.Lock()
		defer e.up.mu.Unlock()
		return e.up.stallEnded == 1, fmt.Sprintf("ended %d times", e.up.stallEnded)
	})
	if b, err := io.ReadAll(body); err == nil {
		t.Fatalf("the cut stream reached the client as complete: %q", b)
	}
	if n := e.turnsPublished(t, "alice"); n != 0 {
		t.Fatalf("%d turns published for a stream Stop cut, want 0", n)
	}
}
