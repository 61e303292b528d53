package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestPublishUnacknowledgedSaysItMayBeStored: a turn whose publish gets no
// acknowledgement in time may have reached the stream (a stream, or the
// connection to it, slower than the timeout): publish says so and how to
// send it again without storing it twice. Before, the bare "publish turn
// t1: context deadline exceeded", which read as not stored, and a frontend
// author's retry without --id stored it twice. A subscriber that never
// answers stands in for the stream, so the publish waits out JetStream's
// 5 s.
func TestPublishUnacknowledgedSaysItMayBeStored(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	sub, err := nc.SubscribeSync(events.TurnSubject(prefix, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runArgs(context.Background(), "publish", "--user", "alice", "--message", "hi", "--id", "t1",
		"--ensure-stream=false", "--nats-url", eventstest.URL(), "--prefix", prefix)
	if code != 1 || !strings.Contains(errOut, "may be stored") || !strings.Contains(errOut, "--id t1") {
		t.Fatalf("publish with no acknowledgement: exit %d, stderr %q; want it said the turn may be stored, and to send it again with --id t1", code, errOut)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the turn did not reach its subject (the test's premise): %v", err)
	}
}
