package worker_test

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestReplayKeepsEventsAnOldTombstoneCoversBySequenceAlone: a tombstone
// written by a forget of an earlier release (no stored time: migration
// 044) is compared by sequence alone, so after the turn stream was
// deleted and created again it covers the user's new events below its
// sequence, published after the forget. Replay skips them (as ingest
// does), but must not delete them from the stream: they are the user's
// words after the forget, and the only copy a later fix could rebuild
// their memory from. Only an event stored before the forget happened is
// surely the forget's.
func TestReplayKeepsEventsAnOldTombstoneCoversBySequenceAlone(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedUsers("bob")
	// The forget of the stream before: it stood at sequence 1,000.
	if _, _, err := e.store.ForgetUser(e.ctx, "dave", events.UserToken("dave"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs); err != nil {
		t.Fatal(err)
	}
	// Written by an earlier release: forgotten_at and stream_seq alone.
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE tombstones SET stream_stored_for = NULL, stream_stored_at = NULL, stream_stored_seq = NULL WHERE user_token = $1`, events.UserToken("dave")); err != nil {
		t.Fatal(err)
	}
	// Dave comes back after the forget, in the stream created since.
	for i := range 3 {
		e.publish(events.Turn{ID: fmt.Sprintf("dave-new-%d", i), UserID: "dave", UserMessage: "I moved to Porto.", AssistantResponse: "ok"})
	}
	p := e.replay(worker.ReplayConfig{})
	if p.Forgotten != 3 {
		t.Fatalf("replay = %+v; want dave's 3 skipped (the old tombstone covers them by sequence)", p)
	}
	if got := e.subjectMsgs(e.stream, events.TurnSubject(e.prefix, "dave")); got != 3 {
		t.Fatalf("dave's subject holds %d events after the replay, want the 3 he published after the forget (replay deleted %d)", got, p.ForgottenDeleted)
	}
}
