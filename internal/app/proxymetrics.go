package app

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ProxyMetrics are the Prometheus metrics of `memoryd proxy`. It implements
// proxy.Observer (the command passes it as the proxy's Observer, so only
// the composition root knows about Prometheus); Handler serves them with
// the Go and process metrics. No label holds a user.
type ProxyMetrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	enrich    *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	published *prometheus.CounterVec
}

// ProxyLabels are the label values the proxy reports, each series shown at
// 0 from the start (an alert on the increase of a series that appears with
// its first event misses that event: upstream_unreachable, say). The
// command passes proxy.Endpoints, proxy.Outcomes and proxy.EnrichOutcomes:
// this package does not import the proxy.
type ProxyLabels struct {
	Endpoints, Outcomes, EnrichOutcomes []string
	// Version labels memoryd_build_info (role "proxy"), as serve's: which
	// version each proxy replica runs, during a rolling upgrade for one.
	// Empty: no memoryd_build_info.
	Version string
}

// NewProxyMetrics returns the proxy's metrics on a registry of their own,
// with the series of l at 0.
func NewProxyMetrics(l ProxyLabels) *ProxyMetrics {
	m := &ProxyMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_proxy_requests_total",
			Help: "Requests the proxy finished, by endpoint (chat, models) and outcome (ok, upstream_status, upstream_timeout, upstream_unreachable, unauthorized, bad_request, cut, upstream_stalled, upstream_stream_error).",
		}, []string{"endpoint", "outcome"}),
		enrich: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memoryd_proxy_enrich_duration_seconds",
			Help:    "Time chat requests spent on memory before forwarding, by outcome (enriched, empty, degraded, failed, skipped); the _count series count the requests.",
			Buckets: enrichBuckets,
		}, []string{"outcome"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "memoryd_proxy_upstream_duration_seconds",
			Help:    "Time the upstream took to send its response headers (a stream's body not included), by status class (2xx, 4xx, 5xx, ..., error when it did not answer).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14), // 10ms to 82s
		}, []string{"class"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memoryd_proxy_turns_published_total",
			Help: "Turns the proxy published to the turn stream (published), or gave up on after its bounded attempts (failed).",
		}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.requests, m.enrich, m.upstream, m.published,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if l.Version != "" {
		m.reg.MustRegister(buildInfo(l.Version, "proxy"))
	}
	// The series alerts watch exist from the start, at 0.
	for _, o := range []string{"published", "failed"} {
		m.published.WithLabelValues(o)
	}
	// Every outcome, as serve's labelled series (ProxyLabels). The
	// upstream's status classes are left to appear with their first
	// answer.
	for _, o := range l.EnrichOutcomes {
		m.enrich.WithLabelValues(o)
	}
	for _, e := range l.Endpoints {
		for _, o := range l.Outcomes {
			m.requests.WithLabelValues(e, o)
		}
	}
	return m
}

// Handler serves the metrics in Prometheus's text format.
func (m *ProxyMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Request implements proxy.Observer.
func (m *ProxyMetrics) Request(endpoint, outcome string) {
	m.requests.WithLabelValues(endpoint, outcome).Inc()
}

// Enriched implements proxy.Observer.
func (m *ProxyMetrics) Enriched(outcome string, took time.Duration) {
	m.enrich.WithLabelValues(outcome).Observe(took.Seconds())
}

// Upstream implements proxy.Observer.
func (m *ProxyMetrics) Upstream(took time.Duration, class string) {
	m.upstream.WithLabelValues(class).Observe(took.Seconds())
}

// TurnPublished implements proxy.Observer.
func (m *ProxyMetrics) TurnPublished(ok bool) {
	m.published.WithLabelValues(map[bool]string{true: "published", false: "failed"}[ok]).Inc()
}
