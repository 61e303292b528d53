package worker_test

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestBacklogCountsTheTurnsNotYetRecorded: turns published while no
// process ingests are the consumer's unread backlog; once recorded and
// acknowledged, the backlog is empty.
func TestBacklogCountsTheTurnsNotYetRecorded(t *testing.T) {
	e := setup(t)
	w, stop := e.startWorker(extractor.NewRules(), nil)
	stop() // the durable consumer stays, with no process reading it
	for i := range 3 {
		e.publish(events.Turn{ID: fmt.Sprint("b", i), UserID: "alice", UserMessage: "I live in Oslo"})
	}
	b, err := w.Backlog(e.ctx)
	if err != nil || b.Unread != 3 || b.Unacked != 0 {
		t.Fatalf("backlog with no process ingesting = %+v, %v; want 3 unread", b, err)
	}
	e.start(extractor.NewRules(), nil)
	e.waitDone(3)
	e.waitFor("an empty backlog", func() (bool, string) {
		b, err := w.Backlog(e.ctx)
		return err == nil && b.Unread == 0 && b.Unacked == 0, fmt.Sprintf("%+v, %v", b, err)
	})
}
