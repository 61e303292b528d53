package app

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// startChangesLocked starts the publisher of memory changes on s and nc;
// a.mu is held.
func (a *App) startChangesLocked(ctx context.Context, s *store.Store, nc *nats.Conn) error {
	cc := a.cfg.Changes
	cc.Conn, cc.Store = nc, s
	c, err := worker.NewChanges(cc)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("app: %w", err)
	}
	a.changes = c
	a.publisher.Store(c)
	if a.metrics != nil {
		a.metrics.reg.MustRegister(&changesCollector{changes: c,
			published: prometheus.NewDesc("memoryd_changes_published_total", "Memory changes published on <prefix>.changes.<token> (the NATS server confirmed them).", nil, nil),
			dropped:   prometheus.NewDesc("memoryd_changes_dropped_total", "Memory changes deleted unpublished after waiting Changes.MaxAge (NATS unreachable).", nil, nil),
			failures:  prometheus.NewDesc("memoryd_changes_failures_total", "Rounds of the change publisher that failed and were retried.", nil, nil),
			waits:     prometheus.NewDesc("memoryd_changes_waits_total", "Rounds of the change publisher put off because NATS was not connected (it waits for the reconnect).", nil, nil),
		})
	}
	return nil
}

// changesCollector reads the publisher's counters at scrape time.
type changesCollector struct {
	changes                             *worker.Changes
	published, dropped, failures, waits *prometheus.Desc
}

func (c *changesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.published
	ch <- c.dropped
	ch <- c.failures
	ch <- c.waits
}

func (c *changesCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.changes.Stats()
	ch <- prometheus.MustNewConstMetric(c.published, prometheus.CounterValue, float64(st.Published))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.Failures))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(st.Waits))
}

// changeCommitted is the store's Committed hook while Start's publisher
// runs: a commit of this process wakes it (the commits do not notify).
func (a *App) changeCommitted(ctx context.Context) {
	if c := a.publisher.Load(); c != nil {
		c.Committed(ctx)
	}
}
