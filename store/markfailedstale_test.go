package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestMarkFailedNotFinalKeepsAFailedTurn: a job's non-final failure (a
// retry to come) recorded after another job failed the turn for good (a
// burst's retry beside a reconciler's job of the same turn) leaves it
// failed; before, it was set back to pending with an attempt more, and no
// job of it left to run.
func TestMarkFailedNotFinalKeepsAFailedTurn(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "a", UserID: "alice", UserMessage: "1", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, "alice", []string{"a"}, "final", true); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, "alice", []string{"a"}, "stale", false); err != nil {
		t.Fatal(err)
	}
	failed, err := s.FailedTurns(ctx, "alice", 10)
	if err != nil || len(failed) != 1 || failed[0].LastError != "final" || failed[0].Attempts != 1 {
		t.Fatalf("failed turns after a stale non-final failure = %+v, %v; want a, failed, its last error \"final\", 1 attempt", failed, err)
	}
}
