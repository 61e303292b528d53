package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestReconcileSettlesTurnsWithoutAJob: every pending turn ends processed or
// failed even when its job is gone. A turn whose job was deleted, or
// completed without processing it, gets a new job; a turn whose job River
// discarded after its last attempt (what its rescuer does to a job whose
// process died on the last attempt) is marked failed with the reason, listed
// and retryable.
func TestReconcileSettlesTurnsWithoutAJob(t *testing.T) {
	e := setup(t)
	jobs := e.recordTurns(recoverTurn("deleted", "dan"), recoverTurn("completed", "dan"), recoverTurn("discarded", "eve"), recoverTurn("queued", "eve"))
	e.exec(`DELETE FROM river_job WHERE id = $1`, jobs["deleted"])
	e.exec(`UPDATE river_job SET state = 'completed', attempt = 1, attempted_at = now(), finalized_at = now() WHERE id = $1`, jobs["completed"])
	e.exec(`UPDATE river_job SET state = 'discarded', attempt = 5, max_attempts = 5, attempted_at = now(), finalized_at = now(),
		attempted_by = ARRAY['gone'] WHERE id = $1`, jobs["discarded"])

	e.start(extractor.NewRules(), nil) // reconciles on start, then every minute
	e.waitFor("every turn settled", func() (bool, string) {
		var states []string
		done := true
		for _, id := range []string{"deleted", "completed", "discarded", "queued"} {
			s := e.turnStatus(id).Status
			states = append(states, id+"="+s)
			done = done && s != store.StatusPending
		}
		return done, strings.Join(states, " ")
	})
	for id, want := range map[string]string{"deleted": store.StatusProcessed, "completed": store.StatusProcessed,
		"queued": store.StatusProcessed, "discarded": store.StatusFailed} {
		if got := e.turnStatus(id).Status; got != want {
			t.Errorf("turn %s is %s, want %s", id, got, want)
		}
	}
	failed, err := e.store.FailedTurns(e.ctx, "", 10)
	if err != nil || len(failed) != 1 || failed[0].EventID != "discarded" ||
		!strings.Contains(failed[0].LastError, "discarded after 5 attempts") {
		t.Fatalf("failed turns = %+v, %v; want the discarded one, with the reason", failed, err)
	}
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v; want 1", n, err)
	}
	e.waitFor("the retried turn processed", func() (bool, string) {
		s := e.turnStatus("discarded").Status
		return s == store.StatusProcessed, s
	})
}

// TestReconcileClearsClaimsLeftOnProcessedTurns: the claims a release
// before MarkProcessed ended them left on processed turns are cleared by
// the reconcile (on start, then every minute), so that a forget of their
// user no longer locks each of them. Before, they stayed until the turns
// were deleted. (A turn not processed keeping its claim:
// store.TestClearProcessedClaims.)
func TestReconcileClearsClaimsLeftOnProcessedTurns(t *testing.T) {
	e := setup(t)
	var turns []store.Turn
	for i := range 3 {
		turns = append(turns, store.Turn{EventID: fmt.Sprintf("old-%d", i), UserID: "dan", ConversationID: "c",
			UserMessage: "hi", TurnAt: time.Now().Add(time.Duration(i-10) * time.Minute)})
	}
	if _, err := e.store.InsertTurns(e.ctx, turns); err != nil {
		t.Fatal(err)
	}
	// As an earlier release left them: processed, still claimed.
	e.exec(`UPDATE turns SET status = 'processed', processed_at = now(), claimed_by = 5, claimed_until = now() + interval '1 hour'`)
	e.start(extractor.NewRules(), nil)
	e.waitFor("the processed turns' claims cleared", func() (bool, string) {
		var n int
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE claimed_by IS NOT NULL OR claimed_until IS NOT NULL`).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d turns claimed", n)
	})
}
