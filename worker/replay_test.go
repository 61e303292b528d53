package worker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/worker"
)

// publishInterleaved publishes perUser turns for each user, interleaved, so that every
// user's events are spread over the whole stream.
func (e *env) publishInterleaved(users []string, perUser int) {
	e.t.Helper()
	for i := range perUser {
		for _, u := range users {
			e.publish(events.Turn{ID: fmt.Sprintf("%s-%d", u, i), UserID: u, ConversationID: "c",
				UserMessage: fmt.Sprintf("Note %d.", i), Timestamp: t0.Add(time.Duration(i) * time.Second)})
		}
	}
}

// turnsOf counts the turns Postgres holds for user.
func (e *env) turnsOf(user string) int64 {
	e.t.Helper()
	st, err := e.store.Stats(e.ctx, user)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.TurnsReceived
}

// TestReplaySurvivesAPurgeWhileReading: forgetting one user purges their
// subject while a replay over all users reads the stream. The replay must
// still read every remaining event of the other users and succeed.
func TestReplaySurvivesAPurgeWhileReading(t *testing.T) {
	e := setup(t)
	const perUser = 150
	e.publishInterleaved([]string{"alice", "bob", "carol"}, perUser)
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	purged := false
	p, err := worker.Replay(e.ctx, worker.ReplayConfig{
		JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream,
		BatchSize: 10, StallTimeout: time.Second,
		// Progress runs on the reading goroutine after each batch: the purge
		// happens while the consumer has more of bob's events buffered.
		Progress: func(p worker.ReplayProgress) {
			if purged || p.Read < 60 {
				return
			}
			purged = true
			if err := stream.Purge(e.ctx, jetstream.WithPurgeSubject(events.TurnSubject(e.prefix, "bob"))); err != nil {
				t.Error(err)
			}
		},
	})
	if err != nil {
		t.Fatalf("replay: %v (progress %+v)", err, p)
	}
	if !purged {
		t.Fatal("the purge did not happen")
	}
	for _, u := range []string{"alice", "carol"} {
		if n := e.turnsOf(u); n != perUser {
			t.Errorf("%s: %d turns replayed, want all %d (progress %+v)", u, n, perUser, p)
		}
	}
}

// TestReplayThatCannotFinishSaysWhatItMissed: the stream disappears while a
// replay reads it. The replay must fail and name the sequences it did not
// read, not report success.
func TestReplayThatCannotFinishSaysWhatItMissed(t *testing.T) {
	e := setup(t)
	e.publishInterleaved([]string{"alice", "bob"}, 50)
	deleted := false
	p, err := worker.Replay(e.ctx, worker.ReplayConfig{
		JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream,
		BatchSize: 10, StallTimeout: time.Second,
		Progress: func(p worker.ReplayProgress) {
			if deleted || p.Read < 30 {
				return
			}
			deleted = true
			if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
				t.Error(err)
			}
		},
	})
	var inc *worker.ReplayIncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("replay error = %v (progress %+v), want a *worker.ReplayIncompleteError", err, p)
	}
	if inc.FirstSeq <= 30 || inc.LastSeq != 100 || inc.Unread == 0 || inc.Unread > 100-30 || p.Read+inc.Unread != 100 {
		t.Errorf("incomplete = %+v after reading %d of 100; want the unread range ending at 100 and its count", inc, p.Read)
	}
	for _, want := range []string{fmt.Sprint(inc.FirstSeq), "100", fmt.Sprint(inc.Unread)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
