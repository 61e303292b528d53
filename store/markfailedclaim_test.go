package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestMarkJobFailedLeavesAnotherJobsClaim: job 1 claims x and its claim
// lapses; job 2 (a burst of the conversation) claims it then; job 1's
// failure, non-final or final, leaves x to job 2: x stays claimed (a new
// burst, job 3, takes only its own turn), pending, with no attempt or
// error of job 1's. Job 2's own failure ends its claim. Before, job 1's
// failure ended job 2's claim, and job 3 claimed x too.
func TestMarkJobFailedLeavesAnotherJobsClaim(t *testing.T) {
	t.Run("not final", func(t *testing.T) { failureBesideAnotherJobsClaim(t, false) })
	t.Run("final", func(t *testing.T) { failureBesideAnotherJobsClaim(t, true) })
}

// failureBesideAnotherJobsClaim is TestMarkJobFailedLeavesAnotherJobsClaim
// with final failures or not.
func failureBesideAnotherJobsClaim(t *testing.T, final bool) {
	ctx, s := setup(t)
	turns := burst(t, ctx, s, "c", 2)
	x, later := turns[0].EventID, turns[1].EventID
	if held, err := s.ClaimTurns(ctx, store.Claim{JobID: 1, UserID: "alice", Own: []string{x}, TTL: time.Minute}); err != nil || len(held) != 0 {
		t.Fatalf("job 1's claim: held %v, %v", held, err)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE turns SET claimed_until = now() - interval '1 second' WHERE event_id = $1`, x); err != nil {
		t.Fatal(err)
	}
	c := claim(2, "c", x)
	c.Limit = 1
	if got, err := s.ClaimConversationTurns(ctx, c); err != nil || len(got) != 1 || got[0].EventID != x {
		t.Fatalf("job 2's claim = %+v, %v; want x, job 1's claim lapsed", got, err)
	}
	if _, err := s.MarkJobFailed(ctx, 1, "alice", []string{x}, "job 1's", final); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimConversationTurns(ctx, claim(3, "c", later)); err != nil || len(got) != 1 || got[0].EventID != later {
		t.Fatalf("final=%v: job 3's claim after job 1's failure = %+v, %v; want %s alone, x job 2's", final, got, err, later)
	}
	turn, err := s.GetTurn(ctx, "alice", x)
	if err != nil || turn.Status != store.StatusPending || turn.Attempts != 0 || turn.LastError != "" {
		t.Fatalf("final=%v: x after job 1's failure = %+v, %v; want it pending, untouched", final, turn, err)
	}
	if _, err := s.MarkJobFailed(ctx, 2, "alice", []string{x}, "job 2's", final); err != nil {
		t.Fatal(err)
	}
	want := store.StatusPending
	if final {
		want = store.StatusFailed
	}
	if turn, err := s.GetTurn(ctx, "alice", x); err != nil || turn.Status != want || turn.LastError != "job 2's" {
		t.Fatalf("final=%v: x after job 2's failure = %+v, %v; want it %s with job 2's error", final, turn, err, want)
	}
	if !final {
		if got, err := s.ClaimConversationTurns(ctx, claim(4, "c", x)); err != nil || len(got) != 1 || got[0].EventID != x {
			t.Fatalf("job 4's claim after job 2's failure = %+v, %v; want x, job 2's claim over", got, err)
		}
	}
}
