package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// otlpCollector is an OTLP/HTTP endpoint that keeps the bodies it was
// sent (uncompressed protobuf: span names are in them as they are).
type otlpCollector struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (c *otlpCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.bodies = append(c.bodies, b)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
}

// count returns how many exports held name.
func (c *otlpCollector) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.bodies {
		n += bytes.Count(b, []byte(name))
	}
	return n
}

// TestRestartedAppTracesTheModelCalls: an App stopped (which shuts its
// OTLP pipeline down) and started again traces the model calls of its
// second run too. Before the fix the LLM extractor built in the first run
// was kept, holding the provider shut down with it, and its calls made no
// span.
func TestRestartedAppTracesTheModelCalls(t *testing.T) {
	t.Parallel()
	col := &otlpCollector{}
	srv := httptest.NewServer(col)
	t.Cleanup(srv.Close)
	llm := extractortest.NewServer(t, extractortest.Content(`{"facts":{"location":"Oslo"},"context":[]}`))
	cfg := testConfig(t)
	cfg.LLM.BaseURL, cfg.LLM.Model = llm.URL(), "fake-model"
	cfg.Tracing.OTLPEndpoint = srv.URL
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	ts := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for run, user := range []string{"alice", "bob"} {
		if err := a.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		publishAndWait(t, a, user, events.Turn{ID: user + "-1", UserID: user, UserMessage: "I live in Oslo", Timestamp: ts})
		// Stop flushes the spans to the collector.
		if err := a.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := col.count("memoryd.llm.chat"), run+1; got != want {
			t.Fatalf("after run %d: %d model call spans exported, want %d", run+1, got, want)
		}
	}
}

// riverUIGoroutines counts the goroutines running riverui's code.
func riverUIGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "riverqueue.com/riverui") {
			n++
		}
	}
	return n
}

// TestStopEndsRiverUI: River's UI's background goroutines (its query
// cache) belong to the operators' endpoint and end with the App's Stop.
// Not parallel: it counts every riverui goroutine of the process.
func TestStopEndsRiverUI(t *testing.T) {
	if n := riverUIGoroutines(); n != 0 {
		t.Fatalf("%d riverui goroutines before the test", n)
	}
	cfg := testConfig(t)
	cfg.Ops.Addr = "127.0.0.1:0"
	cfg.RiverUI = RiverUIConfig{Enabled: true, Token: "tok", Path: riverUIDefaultPath}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	eventstest.Eventually(t, "riverui's goroutines to start", time.Minute, func() (bool, string) {
		n := riverUIGoroutines()
		return n > 0, fmt.Sprint(n)
	})
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "riverui's goroutines to end after Stop", time.Minute, func() (bool, string) {
		n := riverUIGoroutines()
		return n == 0, fmt.Sprint(n)
	})
}
