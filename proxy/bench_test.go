package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// BenchmarkProxyLatency measures, per iteration and in turn (so machine
// noise hits all alike), one request to the fake upstream directly, the
// same request through the proxy with memory off (forwarding alone) and on
// (enrich + forwarding; the turn is then published in the background), non-
// streamed and streamed, and one enrich alone. It reports p50 and p99 of
// each in ms, and of the proxy's added time (proxy minus direct, paired per
// iteration). Run: go test ./proxy -run '^$' -bench ProxyLatency -benchtime 200x
func BenchmarkProxyLatency(b *testing.B) {
	e := newEnv(b, nil)
	ctx := context.Background()
	// Some memory to enrich with: facts and context from a few turns.
	js, err := jetstream.New(e.nc)
	if err != nil {
		b.Fatal(err)
	}
	pub := events.NewPublisher(js, e.prefix)
	msgs := []string{"I live in Lisbon", "My name is Ana", "I work as a nurse", "I have a dog called Rex", "I like hiking in the mountains"}
	for i, m := range msgs {
		if _, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("seed-%d", i), UserID: "alice", UserMessage: m, AssistantResponse: "Noted.", Timestamp: time.Now().UTC()}); err != nil {
			b.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := e.app.WaitProcessed(wctx, "alice", len(msgs), nil); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{}
	do := func(base string, stream, memory bool) time.Duration {
		body := `{"model":"fake-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"where do I live and what is my dog called?"}]}`
		if stream {
			body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
		if !memory {
			req.Header.Set("X-Memory", "off")
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %v", resp.Status, err)
		}
		return took
	}
	enrich := func() time.Duration {
		start := time.Now()
		r, err := e.memory.Enrich(ctx, events.EnrichRequest{UserID: "alice", Message: "where do I live and what is my dog called?"})
		if err != nil || r.Degraded || r.Injection == "" {
			b.Fatalf("enrich: %+v %v", r, err)
		}
		return time.Since(start)
	}
	names := []string{"enrich alone", "direct", "proxy memory off", "proxy memory on", "added (on - direct)",
		"direct stream", "proxy stream memory on", "added stream (on - direct)"}
	got := make([][]time.Duration, len(names))
	// Warm up connections and prepared statements.
	for range 5 {
		enrich()
		do(e.up.URL(), false, false)
		do(e.url, false, true)
		do(e.url, true, true)
	}
	b.ResetTimer()
	for range b.N {
		en := enrich()
		d := do(e.up.URL(), false, false)
		off := do(e.url, false, false)
		on := do(e.url, false, true)
		ds := do(e.up.URL(), true, false)
		ons := do(e.url, true, true)
		for i, v := range []time.Duration{en, d, off, on, on - d, ds, ons, ons - ds} {
			got[i] = append(got[i], v)
		}
	}
	b.StopTimer()
	for i, name := range names {
		p50, p99 := quantile(got[i], 0.5), quantile(got[i], 0.99)
		b.Logf("%-28s p50 %6.2f ms  p99 %6.2f ms  (n=%d)", name, ms(p50), ms(p99), len(got[i]))
	}
	b.ReportMetric(ms(quantile(got[0], 0.5)), "enrich-p50-ms")
	b.ReportMetric(ms(quantile(got[4], 0.5)), "added-p50-ms")
	b.ReportMetric(ms(quantile(got[4], 0.99)), "added-p99-ms")
	b.ReportMetric(ms(quantile(got[7], 0.5)), "added-stream-p50-ms")
	b.ReportMetric(ms(quantile(got[7], 0.99)), "added-stream-p99-ms")
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
