package worker_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/worker"
)

// TestReplayRateOverTheReading: a replay's rate and ETA are measured over
// its reading of the stream, not over a reset's check and delete before
// it (an audit saw "eta 23m13s" with about 30 s left).
func TestReplayRateOverTheReading(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    worker.ReplayProgress
		rate float64
		eta  time.Duration
	}{
		{"reading after a long reset", worker.ReplayProgress{Read: 1000, Total: 4000, Elapsed: 100 * time.Second, Reading: 10 * time.Second}, 100, 30 * time.Second},
		{"no reading measured", worker.ReplayProgress{Read: 1000, Total: 4000, Elapsed: 10 * time.Second}, 100, 30 * time.Second},
		{"nothing elapsed", worker.ReplayProgress{Read: 0, Total: 4000}, 0, 0},
		{"everything read", worker.ReplayProgress{Read: 4000, Total: 4000, Elapsed: 50 * time.Second, Reading: 40 * time.Second}, 100, 0},
	} {
		if r, e := tt.p.Rate(), tt.p.ETA(); r != tt.rate || e != tt.eta {
			t.Errorf("%s: rate %v, eta %s; want %v, %s", tt.name, r, e, tt.rate, tt.eta)
		}
	}
}
