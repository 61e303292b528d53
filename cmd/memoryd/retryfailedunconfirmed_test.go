package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestRetryFailedWhoseCommitWasCutSaysItMayBeDone: a retry-failed whose
// database connection is lost once its COMMIT was sent (its backend
// terminated while the COMMIT waits at a deferred trigger) may have set
// the turns back to pending: memoryd retry-failed says so, which read
// shows those still failed, and that a run again with --limit takes
// others if these were set back (before, it said only to run it again);
// run again, it re-enqueues those still failed.
func TestRetryFailedWhoseCommitWasCutSaysItMayBeDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	st := storetest.Unmigrated(t, dbURL)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "a", UserID: "u", UserMessage: "hi a", TurnAt: at}, {EventID: "b", UserID: "u", UserMessage: "hi b", TurnAt: at.Add(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkFailed(ctx, "u", []string{"a", "b"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	got := commitCut(t, dbURL, "AFTER UPDATE ON turns", "the retry", func() (string, int) {
		_, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed", "--limit", "1")
		return errOut, code
	})
	for _, want := range []string{"its turns may be pending already", "memoryd failed lists those still failed", "other turns, if these were set back"} {
		if got.code != 1 || !strings.Contains(got.errOut, want) {
			t.Errorf("retry-failed --limit 1 whose COMMIT's backend was terminated: exit %d, stderr %q; want it to say %q", got.code, got.errOut, want)
		}
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed", "--limit", "1")
	if code != 0 || !strings.Contains(out, "1 failed turn(s) re-enqueued") {
		t.Fatalf("retry-failed run again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
