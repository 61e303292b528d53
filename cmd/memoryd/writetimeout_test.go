package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestWriteCommandTimedOutSaysItMayHaveBeenDone: memoryd facts set whose
// reply does not come within --timeout (the facts table locked by another
// transaction) exits 1 saying the fact may have been set, as it then is
// once the lock goes (memoryd goes on with a request its caller stopped
// waiting for), and how to check. Before, it read "memoryd did not reply
// within 1s (--timeout)", as a read's timeout does.
func TestWriteCommandTimedOutSaysItMayHaveBeenDone(t *testing.T) {
	t.Parallel()
	nc, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	release := storetest.LockTable(t, st, "facts")
	_, errOut, code := runArgs(ctx, "facts", "set", "--user", "alice", "location", "Lisbon", "--timeout", "1s",
		"--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")
	release()
	client := events.NewClient(nc, prefix)
	eventstest.Eventually(t, "the timed-out facts set to be done", 30*time.Second, func() (bool, string) {
		f, err := client.GetFact(ctx, "alice", "location")
		return err == nil && f.Value == "Lisbon", f.Value
	})
	if code != 1 || !strings.Contains(errOut, "may have been made") || !strings.Contains(errOut, "facts get") {
		t.Errorf("facts set timed out, and then done: exit %d, stderr %q; want exit 1 saying the fact may have been set", code, errOut)
	}
}

// TestMemoryStoreTimedOutNamesTheReadThatShowsIt: memoryd memory store
// whose reply does not come within --timeout (the context table locked)
// names memory list, which shows every item, as the read that tells
// whether it was stored, not memory search, which ranks and cuts what it
// shows.
func TestMemoryStoreTimedOutNamesTheReadThatShowsIt(t *testing.T) {
	t.Parallel()
	_, prefix, st := startTestEnricher(t)
	ctx := context.Background()
	release := storetest.LockTable(t, st, "context")
	_, errOut, code := runArgs(ctx, "memory", "store", "--user", "alice", "home town", "Paris", "--timeout", "1s",
		"--nats-url", eventstest.URL(), "--prefix", prefix, "--log-format", "json")
	release()
	if code != 1 || !strings.Contains(errOut, "may have been made") || !strings.Contains(errOut, "memoryd memory list shows whether it was stored") {
		t.Errorf("memory store timed out: exit %d, stderr %q; want exit 1 naming memory list as the read that shows it", code, errOut)
	}
}
