package app

import (
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BenchmarkProxyMetrics measures what the proxy's metrics add to one chat
// request: the four Observer calls a request with memory makes, in
// parallel as requests run. Run: go test ./internal/app -run '^$' -bench
// ProxyMetrics
func BenchmarkProxyMetrics(b *testing.B) {
	m := NewProxyMetrics(ProxyLabels{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Enriched("enriched", 3*time.Millisecond)
			m.Upstream(40*time.Millisecond, "2xx")
			m.Request("chat", "ok")
			m.TurnPublished(true)
		}
	})
}

// TestProxyMetricsReadZeroAtStart: every request outcome of every endpoint
// and every enrich outcome given is on the proxy's /metrics at 0 before its
// first event, as serve's labelled series are (a metrics walk: only
// enriched, degraded and failed were, so an alert on
// increase(memoryd_proxy_requests_total{outcome="upstream_unreachable"}[5m])
// missed the first outage). proxy.TestMetricsReadZeroAtStart checks the
// proxy's own lists.
func TestProxyMetricsReadZeroAtStart(t *testing.T) {
	rec := httptest.NewRecorder()
	l := ProxyLabels{Endpoints: []string{"chat", "models"}, Outcomes: []string{"ok", "upstream_unreachable"}, EnrichOutcomes: []string{"skipped", "failed"}, Version: "9.9.9"}
	NewProxyMetrics(l).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	var want []string
	for _, e := range l.Endpoints {
		for _, o := range l.Outcomes {
			want = append(want, `memoryd_proxy_requests_total{endpoint="`+e+`",outcome="`+o+`"} 0`)
		}
	}
	for _, o := range l.EnrichOutcomes {
		want = append(want, `memoryd_proxy_enrich_duration_seconds_count{outcome="`+o+`"} 0`)
	}
	// Which version each proxy runs, as serve says of itself (a metrics
	// walk: the proxy had no memoryd_build_info).
	want = append(want, `memoryd_build_info{go_version="`+runtime.Version()+`",role="proxy",version="9.9.9"} 1`)
	for _, w := range want {
		if !strings.Contains(body, w+"\n") {
			t.Errorf("/metrics at start lacks %q", w)
		}
	}
}
