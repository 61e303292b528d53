package worker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestBacklogCountsTheTurnsNotYetRecorded: turns published while no
// process ingests are the consumer's unread backlog; once recorded and
// acknowledged, the backlog is empty.
func TestBacklogCountsTheTurnsNotYetRecorded(t *testing.T) {
	e := setup(t)
	w, stop := e.startWorker(extractor.NewRules(), nil)
	stop() // the durable consumer stays, with no process reading it
	for i := range 3 {
		e.publish(events.Turn{ID: fmt.Sprint("b", i), UserID: "alice", UserMessage: "I live in Oslo"})
	}
	b, err := w.Backlog(e.ctx)
	if err != nil || b.Unread != 3 || b.Unacked != 0 {
		t.Fatalf("backlog with no process ingesting = %+v, %v; want 3 unread", b, err)
	}
	e.start(extractor.NewRules(), nil)
	e.waitDone(3)
	e.waitFor("an empty backlog", func() (bool, string) {
		b, err := w.Backlog(e.ctx)
		return err == nil && b.Unread == 0 && b.Unacked == 0, fmt.Sprintf("%+v, %v", b, err)
	})
}

// TestBacklogFailsAtOnceWhileNATSIsDown: with the NATS connection lost
// (reconnecting), Backlog returns an error without waiting for its
// context: a consumer-info request sent then would sit in the reconnect
// buffer until the deadline, and /metrics, which reads the backlog on the
// database reads' 1 s budget, lost memoryd_llm_tokens_today and the caps
// on every scrape while NATS was down (an audit: each scrape took 1.0 s).
func TestBacklogFailsAtOnceWhileNATSIsDown(t *testing.T) {
	e := setup(t)
	// A connection through a relay the test cuts, so that the shared
	// server stays up for the other tests.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := strings.TrimPrefix(eventstest.URL(), "nats://")
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	disconnected := make(chan struct{}, 1)
	nc, err := nats.Connect("nats://"+ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(time.Hour),
		nats.DisconnectErrHandler(func(*nats.Conn, error) {
			select {
			case disconnected <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := worker.New(worker.Config{Conn: nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	<-disconnected
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	_, err = w.Backlog(ctx)
	if !errors.Is(err, worker.ErrNATSNotConnected) || ctx.Err() != nil {
		t.Fatalf("backlog with NATS down: %v (context: %v), want ErrNATSNotConnected at once", err, ctx.Err())
	}
}
