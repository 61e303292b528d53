package worker_test

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/worker"
)

// TestChangesWaitForNATSDuringAnOutage: changes committed while the NATS
// server is down are not published into the connection's reconnect buffer
// (which every publisher of the process shares): the publisher waits, and
// after the server is back they arrive once each, in order, and leave the
// outbox. Before the fix every failed round published the batch into the
// buffer again and the subscriber got each change several times.
func TestChangesWaitForNATSDuringAnOutage(t *testing.T) {
	e := setup(t)
	srv := eventstest.StartServer(t, func(port int) []string { return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port)} })
	// One connection, as in serve: on the reconnect it subscribes again
	// before it sends anything, so no change goes before the subscription.
	pubConn := srv.Conn(t)
	subConn := pubConn
	c, err := worker.NewChanges(worker.ChangesConfig{Conn: pubConn, Store: e.store, Prefix: e.prefix,
		Logger: slog.New(slog.DiscardHandler), PollInterval: time.Hour, FlushTimeout: 100 * time.Millisecond,
		RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.run("changes", c)
	got := make(chan events.Change, 100)
	sub, err := events.NewClient(subConn, e.prefix).Changes("alice", func(ch events.Change, err error) {
		if err != nil {
			t.Error(err)
			return
		}
		got <- ch
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	// One change before the outage: the publisher works.
	if _, _, err := e.store.SetFact(e.ctx, "alice", "name", "Alice 0"); err != nil {
		t.Fatal(err)
	}
	next := func() events.Change {
		t.Helper()
		select {
		case ch := <-got:
			return ch
		case <-time.After(2 * time.Minute):
			t.Fatal("timed out waiting for a change")
			return events.Change{}
		}
	}
	if ch := next(); ch.Seq != 1 {
		t.Fatalf("first change has seq %d", ch.Seq)
	}
	// ... and was confirmed (else it is sent again after the outage: at
	// least once).
	e.waitFor("the first change to leave the outbox", func() (bool, string) {
		n, err := e.store.PendingChanges(e.ctx)
		return err == nil && n == 0, fmt.Sprintf("%d pending, %v", n, err)
	})

	srv.Stop(t)
	e.waitFor("the publisher's connection to notice the outage", func() (bool, string) {
		return !pubConn.IsConnected(), pubConn.Status().String()
	})
	const during = 5
	for i := range during {
		if _, _, err := e.store.SetFact(e.ctx, "alice", "name", fmt.Sprintf("Alice %d", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	// The publisher noticed the changes and the outage.
	e.waitFor("the publisher to wait for NATS", func() (bool, string) {
		st := c.Stats()
		return st.Waits >= 1, fmt.Sprintf("%+v", st)
	})
	if n, err := pubConn.Buffered(); err != nil || n != 0 {
		t.Fatalf("the publisher put %d bytes into the reconnect buffer while NATS was down (%v)", n, err)
	}

	srv.Start(t)
	e.waitFor("the outbox to empty after the reconnect", func() (bool, string) {
		n, err := e.store.PendingChanges(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d pending, %+v", n, c.Stats())
	})
	// A last change: once it arrived, nothing sent before it is on the way
	// (one connection, one subscriber, in order).
	if _, _, err := e.store.SetFact(e.ctx, "alice", "name", "last"); err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for {
		ch := next()
		seqs = append(seqs, ch.Seq)
		if ch.Value == "last" {
			break
		}
	}
	want := []int64{2, 3, 4, 5, 6, 7}
	if fmt.Sprint(seqs) != fmt.Sprint(want) {
		t.Fatalf("after the outage the subscriber got seqs %v, want %v once each", seqs, want)
	}
}
