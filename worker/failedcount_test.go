package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestFinalFailureCountsNotTheTurnAnotherJobHolds: as in
// TestFailureAfterALapsedClaimLeavesTheNewClaim, job A's claim of x
// lapsed and B took x; A's failure, final here, leaves x to B, which
// extracts it. The metrics counted x failed all the same (A's job named
// it), though no turn was failed.
func TestFinalFailureCountsNotTheTurnAnotherJobHolds(t *testing.T) {
	_, counted := lapsedClaimScene(t, true)
	if n := counted.get("failed"); n != 0 {
		t.Errorf("%d turns counted failed (%s); want none: A's final failure left x to B, which extracted it", n, counted)
	}
}

// turnOutcomes counts the turns Extracted reports, by outcome.
type turnOutcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *turnOutcomes) TurnRejected(string)     {}
func (o *turnOutcomes) Pruned(int64)            {}
func (o *turnOutcomes) Redacted(string, string) {}
func (o *turnOutcomes) Extracted(_ time.Duration, turns int, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome] += turns
}

func (o *turnOutcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

func (o *turnOutcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}
