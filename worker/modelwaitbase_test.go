package worker

import (
	"testing"
	"time"
)

// TestModelWaitEndsWithALongBase: modelWait's doubling overflows
// (base<<30 past int64 for a base over ~8.6s), the total then goes
// negative and never reaches maxModelOutage: every wait from the 30th on
// is "ok" with a snooze of 0, so a job whose model server stays down (or
// refuses the key, now Unreachable) snoozes at once, forever, without
// spending attempts. Worker.Config.JobRetryBase is the base.
func TestModelWaitEndsWithALongBase(t *testing.T) {
	b := retryBudget{maxModelOutage: 30 * time.Minute, modelWaitBase: 10 * time.Second, spread: func(d time.Duration) time.Duration { return d }}
	var total time.Duration
	for waits := 0; waits < 1000; waits++ {
		d, ok := b.modelWait(waits, nil)
		if !ok {
			if total > b.maxModelOutage {
				t.Fatalf("waits totalled %s, over %s", total, b.maxModelOutage)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("wait %d: snooze %s (ok): the total never reaches the bound", waits, d)
		}
		total += d
	}
	t.Fatalf("1000 waits and still ok (total %s)", total)
}
