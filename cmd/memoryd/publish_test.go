package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// serveInProcess runs memoryd serve on a schema, prefix and stream of the
// test's own, with extra flags, until the test ends; it returns the flags
// that reach it (--nats-url, --prefix, --stream).
func serveInProcess(t *testing.T, extra ...string) []string {
	t.Helper()
	_, dbURL := storetest.Schema(t)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	var stdout, stderr eventstest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli{stdout: &stdout, stderr: &stderr}, append([]string{"serve", "--database-url", dbURL, "--nats-url", eventstest.URL(),
			"--prefix", prefix, "--stream", stream, "--log-format", "json", "--workers", "1"}, extra...))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	eventstest.Eventually(t, "serve to start", time.Minute, func() (bool, string) {
		return strings.Contains(stderr.String(), `"enrich service started"`), stderr.String()
	})
	return []string{"--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream}
}

// publish --wait returns once memoryd has processed the turn, so that the
// README's enrich right after it finds it (before, it did only when go
// run's start-up delay gave extraction the time).
func TestPublishWaitsUntilProcessed(t *testing.T) {
	t.Parallel()
	conn := serveInProcess(t)
	for i := range 3 {
		user := "alice" + strings.Repeat("x", i)
		_, errOut, code := runArgs(context.Background(), append([]string{"publish", "--user", user, "--message", "I live in Lisbon", "--response", "Nice!", "--wait", "1m"}, conn...)...)
		if code != 0 || !strings.Contains(errOut, "processed: 1 turn(s) of 1 user(s)") {
			t.Fatalf("publish --wait: exit %d, stderr %q", code, errOut)
		}
		out, errOut, code := runArgs(context.Background(), append([]string{"enrich", "--user", user, "where do I live?"}, conn...)...)
		if code != 0 || !strings.Contains(out, "location=Lisbon") {
			t.Fatalf("enrich right after publish --wait: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	// Without a memoryd answering, --wait says what it needs.
	_, errOut, code := runArgs(context.Background(), "publish", "--user", "bob", "--message", "hi", "--wait", "1m",
		"--nats-url", eventstest.URL(), "--prefix", conn[3]+"none", "--stream", conn[5]+"_NONE")
	if code != 1 || !strings.Contains(errOut, "--wait reads the user's stats from a running memoryd serve (not --role ingest)") {
		t.Fatalf("publish --wait without a memoryd: exit %d, stderr %q", code, errOut)
	}
}
