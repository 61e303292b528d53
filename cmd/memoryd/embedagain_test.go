package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// A backfill run again after one that only enqueued (--no-work, or one
// interrupted: "re-running the backfill is safe") embeds the items the
// first run's jobs hold: it leaves them out of its own jobs (store.NotQueued)
// but waits for them and works their jobs. Found by a review: it counted 0
// and returned at once, with no serve of the model to run those jobs.
func TestEmbedBackfillAgainAfterNoWorkEmbeds(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t) // a migrated schema of the pool
	s := storetest.Unmigrated(t, dbURL)
	// More items than two jobs hold (64 each, none with room to claim
	// another): the command's two embed workers cannot take all of them
	// at its start.
	const items = 256
	var ws []store.ContextWrite
	for i := range items {
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("question %d", i), Answer: "answer"})
	}
	if _, err := s.InsertContext(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	srv := embeddingtest.New(t)
	srv.SetDelay(100 * time.Millisecond)
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--no-work", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 || !strings.Contains(out, "256 items without a m1 vector to embed") {
		t.Fatalf("first embed exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("first: %s", out)
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "embed", "--backfill", "--user", "alice", "--embed-base-url", srv.URL, "--embed-model", "m1")
	if code != 0 {
		t.Fatalf("second embed exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Logf("second: %s", out)
	if n, err := s.CountEmbeddings(context.Background(), "alice", "m1"); err != nil || n != (store.EmbeddingCount{Items: items, Embedded: items}) {
		t.Errorf("after the second backfill (which works): %+v (%v), want all embedded\nstdout:\n%s", n, err, out)
	}
}
