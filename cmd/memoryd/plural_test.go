package main

import (
	"context"
	"strings"
	"testing"
)

// TestReplayOfOneEventSaysItInTheSingular: counts of one are said in the
// singular ("read 1 event ..., 1 turn enqueued", "reset removed 0 facts
// and 1 context item"), not "1 events", "1 turns".
func TestReplayOfOneEventSaysItInTheSingular(t *testing.T) {
	t.Parallel()
	common, _, _ := replaySetup(t, 1)
	out, errOut, code := runArgs(context.Background(), append([]string{"replay", "--no-work"}, common...)...)
	if code != 0 || !strings.Contains(out, "read 1 event (0 invalid, 0 opted out), 1 turn enqueued") {
		t.Errorf("replay of one event: exit %d, stdout %q, stderr %q; want \"read 1 event (0 invalid, 0 opted out), 1 turn enqueued\"", code, out, errOut)
	}
}
