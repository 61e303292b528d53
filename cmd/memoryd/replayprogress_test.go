package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/worker"
)

// TestReplayProgressLastReportWithTurnsAlreadyPending: the last report of a
// replay's recording is forced (not left to progressEvery) also when some
// turns read were already pending extraction, which Enqueued leaves out
// (an extraction backlog, or a replay run again): before, the closing
// report then never came, and the log's last line was the one after the
// last event read, enqueued 0.
func TestReplayProgressLastReportWithTurnsAlreadyPending(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	r := &replayProgress{logger: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	// 40 events read, then their window recorded in 4 transactions of 10,
	// all within progressEvery; 25 of the 40 turns were already pending.
	r.report(worker.ReplayProgress{Read: 40, Total: 40})
	for i, enq := range []int{5, 10, 15, 15} {
		r.report(worker.ReplayProgress{Read: 40, Total: 40, Recorded: 10 * (i + 1), Enqueued: enq})
	}
	// A report after the last (a source's trailing flush) is not forced again.
	r.report(worker.ReplayProgress{Read: 40, Total: 40, Recorded: 40, Enqueued: 15})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "enqueued=0") || !strings.Contains(lines[1], "enqueued=15") {
		t.Fatalf("want the first report after reading everything and the last of the recording, got:\n%s", buf.String())
	}
}
