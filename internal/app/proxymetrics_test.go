package app

import (
	"testing"
	"time"
)

// BenchmarkProxyMetrics measures what the proxy's metrics add to one chat
// request: the four Observer calls a request with memory makes, in
// parallel as requests run. Run: go test ./internal/app -run '^$' -bench
// ProxyMetrics
func BenchmarkProxyMetrics(b *testing.B) {
	m := NewProxyMetrics()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Enriched("enriched", 3*time.Millisecond)
			m.Upstream(40*time.Millisecond, "2xx")
			m.Request("chat", "ok")
			m.TurnPublished(true)
		}
	})
}
