package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// A turn stream deleted and created again numbers from 1 anew. A user
// forgotten in the old stream who comes back is remembered from their first
// new turn, however far the old stream's sequences went; and a user forgotten
// in the new stream loses the dead letters of their events in the old one,
// whatever their sequences. (Before, tombstones and dead letters compared
// sequences of both streams as one: dave's new turns were dropped until the
// new stream passed the forget's sequence, and erin's dead letter stayed.)
func TestForgetAcrossAStreamCreatedAgain(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	// The old stream: bob's turns take it to a sequence far past what the
	// new stream reaches in this test, then dave's and erin's.
	for i := range 30 {
		e.publish(events.Turn{ID: fmt.Sprintf("bob-%d", i), UserID: "bob", UserMessage: fmt.Sprintf("Note %d.", i), AssistantResponse: "ok"})
	}
	for _, user := range []string{"dave", "erin"} {
		for i := range 3 {
			e.publish(events.Turn{ID: fmt.Sprintf("%s-old-%d", user, i), UserID: user, UserMessage: fmt.Sprintf("I live in Lima. Old note %d.", i), AssistantResponse: "ok"})
		}
	}
	// An invalid event of erin's (no timestamp): dead-lettered with its
	// sequence in the old stream.
	if _, err := e.js.Publish(e.ctx, events.TurnSubject(e.prefix, "erin"), []byte(`{"id":"erin-bad","user_id":"erin","user_message":"my secret"}`)); err != nil {
		t.Fatal(err)
	}
	e.waitDone(36)
	e.waitForAcked()
	dl := events.DeadLetterStream(e.stream)
	if got := e.subjectMsgs(dl, events.DeadLetterSubjects(e.prefix)); got != 1 {
		t.Fatalf("dead-letter stream holds %d messages, want erin's 1", got)
	}
	// dave is forgotten in the old stream, at its sequence 37.
	if _, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "dave"); err != nil {
		t.Fatal(err)
	}

	// The operator deletes the stream; the next serve creates it again.
	stop()
	if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), nil)

	// erin is forgotten in the new stream, which holds nothing yet: her
	// dead letter (sequence 37 of the old stream) goes.
	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "erin")
	if err != nil {
		t.Fatal(err)
	}
	if res.DeadLetters != 1 || res.Turns != 3 {
		t.Fatalf("forget erin = %+v; want her 3 turns and her dead letter of the old stream", res)
	}
	if got := e.subjectMsgs(dl, events.DeadLetterSubjects(e.prefix)); got != 0 {
		t.Fatalf("dead-letter stream holds %d messages after erin's forget, want none", got)
	}

	// Stored times within store.StoredSkew of a forget's last event say
	// nothing of which came first (servers' clocks): a user returns, as
	// in life, later than that.
	forgotAt := time.Now()
	e.waitFor("the stored-time skew to pass since the forgets", func() (bool, string) {
		return time.Since(forgotAt) > store.StoredSkew, ""
	})

	// dave comes back: new stream sequences 1-3, below the old forget's.
	for i := range 3 {
		e.publish(events.Turn{ID: fmt.Sprintf("dave-new-%d", i), UserID: "dave", UserMessage: fmt.Sprintf("I live in Oslo. New note %d.", i), AssistantResponse: "ok"})
	}
	e.publish(events.Turn{ID: "erin-new-0", UserID: "erin", UserMessage: "I live in Rome.", AssistantResponse: "ok"})
	// Every event acknowledged (recorded or dropped), then every recorded
	// turn extracted.
	e.waitForAcked()
	e.waitFor("recorded turns extracted", func() (bool, string) {
		st := e.userStats("")
		return st.TurnsPending == 0, fmt.Sprintf("%+v", st)
	})
	for user, want := range map[string]int64{"dave": 3, "erin": 1} {
		if st := e.userStats(user); st.TurnsProcessed != want {
			t.Errorf("%s after coming back: %+v; want the %d new turns processed", user, st, want)
		}
	}
	if got := e.leftovers("dave", "dave-new-0", "dave-new-1", "dave-new-2"); got != "" {
		t.Errorf("dave's forgotten memory came back: %s", got)
	}
}

// nats-server 2.9.10 reports a later creation time for a stream after a
// configuration update and a restart (an operator's walk saw 23:47:16 become
// 23:48:34, the stream untouched otherwise). Clears told the turn stream
// apart by its creation time, so a turn published before a clear and
// stamped ahead of it came back once extracted after such restarts. Positions
// are now ordered by the time each event was stored, which does not move.
// The test runs its own nats-server, which it restarts.
func TestClearHoldsAcrossRestartsOfTheStreamsServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := eventstest.StartServer(t, func(port int) []string {
		return []string{"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", dir}
	})
	nc, err := nats.Connect(srv.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), nc: nc, js: js, store: storetest.New(t), prefix: events.DefaultPrefix, stream: events.DefaultStream}
	if _, err := events.EnsureStream(e.ctx, js, events.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	e.pub = events.NewPublisher(js, e.prefix)
	e.store.SetTurnStream(worker.TurnStreamPosition(js, e.stream))

	// Published (and acknowledged) before the clear, stamped 3 minutes
	// after it: within the allowed clock skew, so kept as sent.
	e.publish(events.Turn{ID: "alice-1", UserID: "alice", UserMessage: "My secret hobby is falconry.", AssistantResponse: "Noted.",
		Timestamp: time.Now().UTC().Add(3 * time.Minute)})
	if _, err := e.store.DeleteContext(e.ctx, store.ContextDelete{UserID: "alice", All: true}); err != nil {
		t.Fatal(err)
	}
	created := func() time.Time {
		t.Helper()
		var info *jetstream.StreamInfo
		e.waitFor("the stream's info after a restart", func() (bool, string) {
			st, err := js.Stream(e.ctx, e.stream)
			if err != nil {
				return false, err.Error()
			}
			info = st.CachedInfo()
			return true, ""
		})
		return info.Created
	}
	before := created()
	// The operator edits the stream between two restarts of its server.
	srv.Restart(t)
	e.waitFor("an update of the stream's description", func() (bool, string) {
		st, err := js.Stream(e.ctx, e.stream)
		if err != nil {
			return false, err.Error()
		}
		cfg := st.CachedInfo().Config
		cfg.Description = "edited by the operator"
		if _, err := js.UpdateStream(e.ctx, cfg); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	srv.Restart(t)
	t.Logf("the stream's creation time: %s before the restarts, %s after", before.Format(time.RFC3339Nano), created().Format(time.RFC3339Nano))

	e.start(extractor.NewRules(), nil)
	e.waitDone(1)
	if st := e.userStats("alice"); st.TurnsProcessed != 1 || st.ContextItems != 0 {
		t.Fatalf("alice after extraction: %+v; want her turn processed and no context item (cleared)", st)
	}
}

// Ingest goes on when its durable consumer is deleted, alone or with its
// stream (an operator's `nats consumer rm` or `nats stream rm`): the worker
// binds the consumer again, once the stream exists again (it does not
// create the stream itself: the operator may be creating it with settings
// of their own), and records what is published after. (Before, nats.go ended the consume on "consumer deleted", and
// serve read nothing more until it was restarted: an operator's walk had
// 240 turns wait in the new stream.)
func TestIngestGoesOnAfterItsConsumerIsDeleted(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	publish := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			e.publish(events.Turn{ID: fmt.Sprintf("alice-%d", i), UserID: "alice", UserMessage: fmt.Sprintf("Note %d.", i), AssistantResponse: "ok"})
		}
	}
	publish(0, 5)
	e.waitDone(5)
	e.waitForAcked()

	if err := e.js.DeleteConsumer(e.ctx, e.stream, "memoryd-ingest"); err != nil {
		t.Fatal(err)
	}
	// The consumer comes back (publishing before it does would leave the
	// events to the new consumer anyway: it starts from the stream's first
	// event not acknowledged, which is all of them).
	e.waitFor("the consumer created again", func() (bool, string) {
		_, err := e.js.Consumer(e.ctx, e.stream, "memoryd-ingest")
		return err == nil, fmt.Sprint(err)
	})
	publish(5, 5)
	e.waitDone(10)

	if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
		t.Fatal(err)
	}
	// The operator creates it again (a publish or a serve start would).
	if _, err := events.EnsureStream(e.ctx, e.js, events.StreamConfig{Prefix: e.prefix, Stream: e.stream}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the consumer created again on the new stream", func() (bool, string) {
		_, err := e.js.Consumer(e.ctx, e.stream, "memoryd-ingest")
		return err == nil, fmt.Sprint(err)
	})
	publish(10, 5)
	e.waitDone(15)
	if st := e.userStats("alice"); st.TurnsProcessed != 15 || st.TurnsReceived != 15 {
		t.Fatalf("alice = %+v, want her 15 turns recorded once and processed", st)
	}
}

// A forget while the turn stream does not exist deletes nothing and says
// why and what to do (before: "stream not found" wrapped, which the forget
// endpoint answered as "500 memory store unavailable").
func TestForgetWithoutTheTurnStreamSaysSo(t *testing.T) {
	e := setup(t)
	stop := e.start(extractor.NewRules(), nil)
	e.publish(events.Turn{ID: "alice-1", UserID: "alice", UserMessage: "I live in Lima.", AssistantResponse: "ok"})
	e.waitDone(1)
	stop()
	if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
		t.Fatal(err)
	}
	_, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice")
	var ns *worker.NoTurnStreamError
	if !errors.As(err, &ns) || !strings.Contains(err.Error(), "nothing was deleted") || !strings.Contains(err.Error(), "send the forget again") {
		t.Fatalf("forget without the turn stream: %v; want a *worker.NoTurnStreamError saying nothing was deleted", err)
	}
	if st := e.userStats("alice"); st.TurnsProcessed != 1 {
		t.Fatalf("alice after the refused forget: %+v; want her turn kept", st)
	}
}
