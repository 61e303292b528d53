package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// rawPublish publishes turn as an older frontend would: with msgID as its
// Nats-Msg-Id.
func (e *env) rawPublish(turn events.Turn, msgID string) *jetstream.PubAck {
	e.t.Helper()
	if turn.Timestamp.IsZero() {
		turn.Timestamp = t0
	}
	data, err := json.Marshal(turn)
	if err != nil {
		e.t.Fatal(err)
	}
	msg := &nats.Msg{Subject: events.TurnSubject(e.prefix, turn.UserID), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	ack, err := e.js.PublishMsg(e.ctx, msg)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack
}

func (e *env) userStats(user string) store.UserStats {
	e.t.Helper()
	st, err := e.store.Stats(e.ctx, user)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// Two users' turns with the same event id are two turns: each is recorded,
// processed, replayed, and forgetting one user leaves the other's.
func TestSameEventIDOfTwoUsersKeepsBoth(t *testing.T) {
	e := setup(t)
	// Through the publisher: the Nats-Msg-Id carries the user token.
	for _, u := range []struct{ user, city string }{{"alice", "Paris"}, {"bob", "Oslo"}} {
		ack, err := e.pub.Publish(e.ctx, events.Turn{ID: "shared", UserID: u.user, UserMessage: "I live in " + u.city + ".", Timestamp: t0})
		if err != nil || ack.Duplicate {
			t.Fatalf("publish %s's turn: %+v, %v", u.user, ack, err)
		}
	}
	// An older frontend sending the bare id as Nats-Msg-Id, a re-publish
	// outside the duplicate window (different Nats-Msg-Ids): memoryd keeps
	// both.
	e.rawPublish(events.Turn{ID: "bare", UserID: "alice", UserMessage: "I prefer tea."}, "bare")
	e.rawPublish(events.Turn{ID: "bare", UserID: "bob", UserMessage: "I prefer coffee."}, "bare-later")
	// The same bare id inside the duplicate window: JetStream drops the
	// second user's event and says so in the ack (documented).
	e.rawPublish(events.Turn{ID: "old", UserID: "alice", UserMessage: "I like jazz."}, "old")
	if ack := e.rawPublish(events.Turn{ID: "old", UserID: "bob", UserMessage: "I like rock."}, "old"); !ack.Duplicate {
		t.Fatalf("bare id reused inside the window: ack %+v, want duplicate", ack)
	}
	var logs lockedBuffer
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	e.waitDone(5)
	e.waitForAcked()
	// The three bare ids it saw are counted, the publisher's two are not;
	// the warning comes once a minute, not once an event.
	if n := w.Stats().MsgIDMismatch; n != 3 {
		t.Errorf("Nats-Msg-Id mismatches counted: %d, want 3", n)
	}
	if n := strings.Count(logs.String(), "Nats-Msg-Id other than"); n != 1 {
		t.Errorf("%d warnings of a Nats-Msg-Id mismatch, want 1:\n%s", n, logs.String())
	}
	for user, want := range map[string]int64{"alice": 3, "bob": 2} {
		if st := e.userStats(user); st.TurnsReceived != want || st.TurnsProcessed != want || st.ContextItems != want {
			t.Fatalf("%s stats = %+v; want %d turns processed, with context", user, st, want)
		}
	}
	for _, u := range []string{"alice", "bob"} {
		turn, err := e.store.GetTurn(e.ctx, u, "shared")
		if err != nil || turn.Status != store.StatusProcessed || turn.UserID != u {
			t.Fatalf("%s's turn = %+v, %v", u, turn, err)
		}
	}

	p := e.replay(worker.ReplayConfig{Reset: true})
	if p.Enqueued != 5 {
		t.Fatalf("replay enqueued %d turns, want 5", p.Enqueued)
	}
	for user, want := range map[string]int64{"alice": 3, "bob": 2} {
		if st := e.userStats(user); st.TurnsProcessed != want || st.ContextItems != want {
			t.Fatalf("after replay %s stats = %+v; want %d processed", user, st, want)
		}
	}

	if _, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice"); err != nil {
		t.Fatal(err)
	}
	if st := e.userStats("alice"); st.TurnsReceived != 0 {
		t.Fatalf("alice stats after forget = %+v", st)
	}
	turn, err := e.store.GetTurn(e.ctx, "bob", "shared")
	if err != nil || turn.Status != store.StatusProcessed {
		t.Fatalf("bob's turn after alice's forget = %+v, %v", turn, err)
	}
	if st := e.userStats("bob"); st.TurnsReceived != 2 || st.ContextItems != 2 {
		t.Fatalf("bob stats after alice's forget = %+v", st)
	}
}

// The same user and id with other content is dead-lettered with a reason;
// with the same content (a retry) it is one turn.
func TestConflictingDuplicateIsDeadLettered(t *testing.T) {
	e := setup(t)
	turn := events.Turn{ID: "x", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Nice.", Timestamp: t0,
		Metadata: json.RawMessage(`{"client":"web","n":1}`)}
	e.publish(turn)
	other := turn
	other.UserMessage = "I live in Rome."
	e.rawPublish(other, "retry-1")
	// A retry of the first: the same content (metadata keys in another
	// order), another Nats-Msg-Id.
	again := turn
	again.Metadata = json.RawMessage(`{"n":1,"client":"web"}`)
	e.rawPublish(again, "retry-2")
	e.start(extractor.NewRules(), nil)
	e.waitDone(1)
	e.waitForAcked()

	st := e.userStats("alice")
	if st.TurnsReceived != 1 || st.TurnsProcessed != 1 || st.ContextItems != 1 {
		t.Fatalf("alice stats = %+v; want the first turn only", st)
	}
	got, err := e.store.GetTurn(e.ctx, "alice", "x")
	if err != nil || got.UserMessage != turn.UserMessage {
		t.Fatalf("turn = %+v, %v", got, err)
	}
	dl, err := e.js.Stream(e.ctx, events.DeadLetterStream(e.stream))
	if err != nil {
		t.Fatal(err)
	}
	info, err := dl.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("dead-letter stream holds %d messages, want the conflicting event", info.State.Msgs)
	}
	m, err := dl.GetMsg(e.ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	var body events.Turn
	if err := json.Unmarshal(m.Data, &body); err != nil || body.UserMessage != other.UserMessage {
		t.Fatalf("dead letter body = %s (%v)", m.Data, err)
	}
	if r := m.Header.Get(events.HeaderReason); !strings.Contains(r, "conflicting duplicate event id") || !strings.Contains(r, `"x"`) {
		t.Fatalf("dead letter reason = %q", r)
	}
}

// A batch holding a user's turn and its conflicting duplicate records the
// first and dead-letters the second, however the batch is cut.
func TestConflictInOneBatch(t *testing.T) {
	e := setup(t)
	for i := range 3 {
		e.rawPublish(events.Turn{ID: "y", UserID: "alice", UserMessage: fmt.Sprintf("I live in city%d.", i),
			Timestamp: t0.Add(time.Duration(i) * time.Second)}, fmt.Sprint("m", i))
	}
	e.start(extractor.NewRules(), func(c *worker.Config) { c.BatchSize = 10 })
	e.waitDone(1)
	e.waitForAcked()
	got, err := e.store.GetTurn(e.ctx, "alice", "y")
	if err != nil || got.UserMessage != "I live in city0." {
		t.Fatalf("turn = %+v, %v", got, err)
	}
	dl, err := e.js.Stream(e.ctx, events.DeadLetterStream(e.stream))
	if err != nil {
		t.Fatal(err)
	}
	info, err := dl.Info(e.ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("dead letters: %+v, %v; want 2", info, err)
	}
}

// TestLegacyJobMarksOnlyItsOwnTurns: a job enqueued before event ids became
// per user names no user and finds its turns by id alone. When another user's
// turn with the same id arrives while that job extracts, the job's save must
// neither take nor mark it: it stays pending for its own job.
func TestLegacyJobMarksOnlyItsOwnTurns(t *testing.T) {
	e := setup(t)
	g := &gatedExtractor{Extractor: extractor.NewRules(), entered: make(chan string, 10)}
	release := g.hold()
	// A legacy job of two users (replay jobs mixed users): alice's "x" and
	// carol's "y", no user in its arguments.
	jobs := e.recordTurns(recoverTurn("x", "alice"), recoverTurn("y", "carol"))
	e.exec(`UPDATE river_job SET args = jsonb_build_object('event_ids', jsonb_build_array('x', 'y')) WHERE id = $1`, jobs["x"])
	e.exec(`DELETE FROM river_job WHERE id = $1`, jobs["y"])
	e.start(g, nil)
	if id := recv(t, g.entered, "the legacy job to extract"); id != "x" {
		t.Fatalf("extracting %s, want x", id)
	}
	// bob's turn with the same id arrives, recorded without a job here so
	// that only the legacy job could touch it.
	if _, err := e.store.InsertTurns(e.ctx, []store.Turn{recoverTurn("x", "bob")}); err != nil {
		t.Fatal(err)
	}
	release()
	e.waitFor("alice's and carol's turns processed", func() (bool, string) {
		a, err := e.store.GetTurn(e.ctx, "alice", "x")
		c, err2 := e.store.GetTurn(e.ctx, "carol", "y")
		return err == nil && err2 == nil && a.Status == store.StatusProcessed && c.Status == store.StatusProcessed, fmt.Sprint(a.Status, c.Status, err, err2)
	})
	if tu, err := e.store.GetTurn(e.ctx, "bob", "x"); err != nil || tu.Status != store.StatusPending {
		t.Fatalf("bob's turn with the same id = %+v, %v; want it left pending", tu, err)
	}
}

// TestMsgIDMismatchCountedOnce: a turn with a bare Nats-Msg-Id whose batch
// cannot be recorded at first (a table locked: the transaction times out,
// the batch is handed back) is counted once, when it is recorded, not once
// a delivery (before: once each time ingest read it).
func TestMsgIDMismatchCountedOnce(t *testing.T) {
	e := setup(t)
	b := e.block(`LOCK TABLE turns IN SHARE MODE`)
	e.rawPublish(events.Turn{ID: "bare", UserID: "alice", UserMessage: "I like jazz."}, "bare")
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) { c.AckWait = time.Second })
	e.waitFor("the event read three times", func() (bool, string) {
		st := w.Stats()
		return st.Received >= 3, fmt.Sprintf("%+v", st)
	})
	if err := b.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waitDone(1)
	e.waitForAcked()
	if st := w.Stats(); st.MsgIDMismatch != 1 || st.Recorded != 1 {
		t.Errorf("stats %+v: want the one turn recorded and its Nats-Msg-Id counted once", st)
	}
}
