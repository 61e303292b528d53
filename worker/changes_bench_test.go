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
	"github.com/memoryd/memoryd/store"
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

// BenchmarkChangesBacklog: the outbox a replay leaves (a change per fact
// it rebuilds), here 20k changes over 1 and over 100 users, committed
// while no publisher ran; reports how long a publisher (defaults: batches
// of 200) takes to empty it, in ms, and the rate in changes per second.
func BenchmarkChangesBacklog(b *testing.B) {
	const backlog = 20_000
	for _, users := range []int{1, 100} {
		b.Run(fmt.Sprintf("users=%d", users), func(b *testing.B) {
			ctx, nc, s := context.Background(), eventstest.Conn(b), storetest.New(b)
			prefix, _ := eventstest.Names(b, nc)
			var took time.Duration
			for range b.N {
				b.StopTimer()
				facts := make([]store.FactWrite, 0, backlog)
				for i := range backlog {
					facts = append(facts, store.FactWrite{UserID: fmt.Sprintf("user%03d", i%users), Key: fmt.Sprintf("key%06d", i),
						Value: fmt.Sprintf("a value of fact %d, as long as a short sentence", i), SourceAt: time.Now()})
				}
				for chunk := range slices.Chunk(facts, 500) { // a replay's writes come in jobs too
					if _, err := s.UpsertFacts(ctx, chunk); err != nil {
						b.Fatal(err)
					}
				}
				if n, err := s.PendingChanges(ctx); err != nil || n != backlog {
					b.Fatalf("%d pending, %v", n, err)
				}
				c, err := worker.NewChanges(worker.ChangesConfig{Conn: nc, Store: s, Prefix: prefix, Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				start := time.Now()
				if err := c.Start(ctx); err != nil {
					b.Fatal(err)
				}
				for c.Stats().Published < backlog {
					n, err := s.PendingChanges(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if n == 0 && c.Stats().Published >= backlog {
						break
					}
					time.Sleep(10 * time.Millisecond) // measuring, not synchronising
				}
				took += time.Since(start)
				b.StopTimer()
				if err := c.Stop(ctx); err != nil {
					b.Fatal(err)
				}
				// The next iteration writes the same keys: new values.
				if _, err := s.Pool().Exec(ctx, `DELETE FROM memory_changes`); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "drain_ms")
			b.ReportMetric(float64(backlog)*float64(b.N)/took.Seconds(), "changes/s")
		})
	}
}
