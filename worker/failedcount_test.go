package worker_test

import "testing"

// TestFinalFailureCountsNotTheTurnAnotherJobHolds: as in
// TestFailureAfterALapsedClaimLeavesTheNewClaim, job A's claim of x
// lapsed and B took x; A's failure, final here, leaves x to B, which
// extracts it. The metrics counted x failed all the same (A's job named
// it), though no turn was failed.
func TestFinalFailureCountsNotTheTurnAnotherJobHolds(t *testing.T) {
	_, counted := lapsedClaimScene(t, true)
	if n := counted.turnsOf("failed"); n != 0 {
		t.Errorf("%d turns counted failed (%s); want none: A's final failure left x to B, which extracted it", n, counted)
	}
}
