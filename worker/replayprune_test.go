package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestReplayWorkersLeaveThePruneToTheServes: the prune job is worked with
// the limits of the process that takes it, and a replay's own workers
// (DisableIngest: `memoryd replay` without --no-work) take jobs beside the
// serves, with the replay command's settings, which an operator does not
// repeat. Found by a lifecycle walk: serves with --turn-retention 720h, and
// `memoryd replay --user u01` with no other flag cleared the text of 2,003
// turns of other users that were 8 days old (its default 168h). Before: the
// replay's worker, River's leader, ran the prune at its start and cleared
// the turn's text; after: it hands the job back for a serve.
func TestReplayWorkersLeaveThePruneToTheServes(t *testing.T) {
	e := setup(t)
	// A serve that keeps turn text for good.
	stop := e.start(extractor.NewRules(), func(c *worker.Config) { c.TurnRetention = -1 })
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Lisbon.", AssistantResponse: "Nice."})
	e.waitDone(1)
	stop()
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE turns SET processed_at = now() - interval '8 days'`); err != nil {
		t.Fatal(err)
	}
	// A replay's workers on the defaults (7 days), alone: River's leader,
	// which runs the prune at start.
	e.start(extractor.NewRules(), func(c *worker.Config) { c.DisableIngest = true; c.PruneInterval = time.Hour })
	// Worked: completed, or handed back (River counts the snoozes).
	e.waitFor("the prune job to be worked", func() (bool, string) {
		var state string
		var snoozes int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state, coalesce((metadata->>'snoozes')::int, 0) FROM river_job WHERE kind = $1 ORDER BY id DESC LIMIT 1`,
			worker.PruneArgs{}.Kind()).Scan(&state, &snoozes)
		return err == nil && (state == "completed" || snoozes > 0), fmt.Sprint(state, snoozes, err)
	})
	var cleared bool
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT text_cleared_at IS NOT NULL FROM turns WHERE event_id = 'a1'`).Scan(&cleared); err != nil {
		t.Fatal(err)
	}
	if cleared {
		t.Fatal("a replay's worker cleared the text of a turn the serve keeps for good (its own --turn-retention default)")
	}
}
