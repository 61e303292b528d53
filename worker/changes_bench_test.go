package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// BenchmarkChangeLatency: from a facts.set's commit to its change at a
// subscriber, through the notification (the poll interval is an hour).
// Reports the p50 and p99 in microseconds.
func BenchmarkChangeLatency(b *testing.B) {
	ctx, nc, s := context.Background(), eventstest.Conn(b), storetest.New(b)
	prefix, _ := eventstest.Names(b, nc)
	c, err := worker.NewChanges(worker.ChangesConfig{Conn: nc, Store: s, Prefix: prefix, Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	arrived := make(chan events.Change, 1)
	sub, err := events.NewClient(nc, prefix).Changes("alice", func(ch events.Change, err error) {
		if err == nil {
			arrived <- ch
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := s.SetFact(ctx, "alice", "name", fmt.Sprintf("Alice %d", i)); err != nil {
			b.Fatal(err)
		}
		committed := time.Now()
		select {
		case ch := <-arrived:
			if ch.Seq != int64(i+1) {
				b.Fatalf("change %d arrived as seq %d", i+1, ch.Seq)
			}
		case <-time.After(time.Minute):
			b.Fatalf("change %d never arrived", i+1)
		}
		took = append(took, time.Since(committed))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50_us")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99_us")
}
