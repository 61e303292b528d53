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
// the turns back to pending: memoryd retry-failed says so and to run it
// again, not only "commit not confirmed"; run again, it re-enqueues them.
func TestRetryFailedWhoseCommitWasCutSaysItMayBeDone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := storetest.Migrated(t)
	st := storetest.Unmigrated(t, dbURL)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "a", UserID: "u", UserMessage: "hi a", TurnAt: at}}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkFailed(ctx, "u", []string{"a"}, "boom", true); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	got := commitCut(t, dbURL, "AFTER UPDATE ON turns", "the retry", func() (string, int) {
		_, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed")
		return errOut, code
	})
	if got.code != 1 || !strings.Contains(got.errOut, "may be set back to pending already; run it again") {
		t.Errorf("retry-failed whose COMMIT's backend was terminated: exit %d, stderr %q; want it to say the turns may be set back and to run it again", got.code, got.errOut)
	}
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "retry-failed")
	if code != 0 || !strings.Contains(out, "1 failed turn(s) re-enqueued") {
		t.Fatalf("retry-failed run again: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
