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

// TestFailedSaysWhenTheLimitCutTheList: with more failed turns than
// --limit, `memoryd failed` printed "100 failed turn(s)" under the first
// 100 of 567 (an outside-in audit), which reads as the total.
func TestFailedSaysWhenTheLimitCutTheList(t *testing.T) {
	t.Parallel()
	dbURL := storetest.Migrated(t) // a migrated schema of the pool
	st := storetest.Unmigrated(t, dbURL)
	ctx := context.Background()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ids := []string{"a", "b", "c"}
	var turns []store.Turn
	for _, id := range ids {
		turns = append(turns, store.Turn{EventID: id, UserID: "u", UserMessage: "hi " + id, TurnAt: at})
	}
	if _, err := st.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkFailed(ctx, "u", ids, "boom", true); err != nil {
		t.Fatal(err)
	}
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	out, errOut, code := runCmd(t, dbURL, prefix, stream, "failed", "--limit", "2")
	if code != 0 {
		t.Fatalf("failed --limit 2 exited %d: %s", code, errOut)
	}
	if !strings.Contains(out, "there may be more") {
		t.Errorf("failed --limit 2 of 3 failed turns does not say the list was cut:\n%s", out)
	}
	out, errOut, code = runCmd(t, dbURL, prefix, stream, "failed")
	if code != 0 || !strings.Contains(out, "3 failed turn(s)\n") || strings.Contains(out, "may be more") {
		t.Errorf("failed (all 3 within the limit) exited %d:\n%s%s", code, out, errOut)
	}
}
