package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestFutureTimestampIsClamped: a turn stamped 2099 is recorded at the time
// the stream stored it (the sent time kept), so a facts.set afterwards is
// stored and a later real turn still overrides it; a replay clamps the same.
func TestFutureTimestampIsClamped(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	future := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
	ack, err := e.pub.Publish(e.ctx, events.Turn{ID: "f1", UserID: "alice", UserMessage: "I live in Tokyo.", Timestamp: future})
	if err != nil {
		t.Fatal(err)
	}
	e.waitDone(1)
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(e.ctx, ack.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	storedAt := raw.Time.Truncate(time.Microsecond) // as Postgres keeps it
	turn, err := e.store.GetTurn(e.ctx, "alice", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if !turn.TurnAt.Equal(storedAt) || turn.ClampedFrom == nil || !turn.ClampedFrom.Equal(future) {
		t.Fatalf("turn at %s (clamped from %v); want the stream's time %s, clamped from %s", turn.TurnAt, turn.ClampedFrom, storedAt, future)
	}
	loc, err := e.store.Fact(e.ctx, "alice", "location")
	if err != nil || loc.Value != "Tokyo" || !loc.SourceAt.Equal(storedAt) {
		t.Fatalf("location = %+v, %v", loc, err)
	}

	f, stored, err := e.store.SetFact(e.ctx, "alice", "location", "Paris")
	if err != nil || !stored || f.Value != "Paris" {
		t.Fatalf("facts.set after the future turn = %+v, %v, %v; want Paris stored", f, stored, err)
	}
	// A second later: the facts.set is dated by Postgres's clock as this
	// process reads it, within half a reading's round trip (milliseconds,
	// more on a loaded machine: a turn stamped just after the set, by this
	// host's clock, lost to it 9 ms ahead in a CI-like run).
	e.publish(events.Turn{ID: "f2", UserID: "alice", UserMessage: "I live in Rome.", Timestamp: time.Now().UTC().Add(time.Second)})
	e.waitDone(2)
	if loc, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || loc.Value != "Rome" {
		t.Fatalf("location after a later real turn = %+v, %v; want Rome", loc, err)
	}

	e.replay(worker.ReplayConfig{Users: []string{"alice"}})
	again, err := e.store.GetTurn(e.ctx, "alice", "f1")
	if err != nil || !again.TurnAt.Equal(turn.TurnAt) {
		t.Fatalf("after replay the turn is at %s, %v; want %s as at ingestion", again.TurnAt, err, turn.TurnAt)
	}
	if loc, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || loc.Value != "Rome" {
		t.Fatalf("location after replay = %+v, %v; want Rome", loc, err)
	}
}

// TestOptedOutTurnIsErasedFromTheStream: memory:false means the text is
// not retained: once handled, the event is gone from the stream, while its
// opted-in neighbours stay.
func TestOptedOutTurnIsErasedFromTheStream(t *testing.T) {
	e := setup(t)
	off := false
	var seqs []uint64
	for i, turn := range []events.Turn{
		{ID: "before", UserID: "alice", UserMessage: "I live in Rome."},
		{ID: "secret", UserID: "alice", UserMessage: "My password is hunter2.", Memory: &off},
		{ID: "after", UserID: "alice", UserMessage: "I have a cat."},
	} {
		turn.Timestamp = t0.Add(time.Duration(i) * time.Second)
		ack, err := e.pub.Publish(e.ctx, turn)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	e.start(extractor.NewRules(), nil)
	e.waitDone(2)
	e.waitForAcked()
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetMsg(e.ctx, seqs[1]); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("opted-out event still in the stream (err %v)", err)
	}
	for _, seq := range []uint64{seqs[0], seqs[2]} {
		if _, err := stream.GetMsg(e.ctx, seq); err != nil {
			t.Fatalf("opted-in event %d: %v", seq, err)
		}
	}
	info, err := stream.Info(e.ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream holds %+v, %v; want the 2 opted-in events", info.State, err)
	}
	if _, err := e.store.GetTurn(e.ctx, "alice", "secret"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("opted-out turn in Postgres: %v", err)
	}
}

// outcomes records the worker's extraction outcomes: the jobs (n) and the
// turns they reported, by outcome.
type outcomes struct {
	mu    sync.Mutex
	n     map[string]int
	turns map[string]int
}

func (o *outcomes) TurnRejected(string)     {}
func (o *outcomes) Pruned(int64)            {}
func (o *outcomes) Redacted(string, string) {}
func (o *outcomes) Extracted(_ time.Duration, turns int, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome]++
	if o.turns == nil {
		o.turns = map[string]int{}
	}
	o.turns[outcome] += turns
}

func (o *outcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("jobs %v, turns %v", o.n, o.turns)
}

// get is the jobs that reported outcome.
func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// turnsOf is the turns reported with outcome.
func (o *outcomes) turnsOf(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.turns[outcome]
}

// TestLockWaitIsSnoozedNotFailed: while another transaction holds the row
// of the fact a job must write, the job is snoozed without spending an
// attempt (with one attempt allowed, any failure would end it failed), and
// completes once the lock is released.
func TestLockWaitIsSnoozedNotFailed(t *testing.T) {
	e := setup(t)
	if _, err := e.store.UpsertFacts(e.ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Oslo", SourceAt: t0.Add(-time.Hour), EventID: "old"}}); err != nil {
		t.Fatal(err)
	}
	holder, err := e.store.Pool().Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(e.ctx, `SELECT * FROM facts WHERE user_id = 'alice' AND key = 'location' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	obs := &outcomes{n: map[string]int{}}
	e.start(extractor.NewRules(), func(c *worker.Config) {
		c.Observer = obs
		c.MaxAttempts = 1
		c.JobTimeout = 2 * time.Second
		c.LockTimeout = 100 * time.Millisecond
	})
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "I live in Rome."})
	e.waitFor("the job snoozed twice on the lock", func() (bool, string) {
		turn, err := e.store.GetTurn(e.ctx, "alice", "t1")
		if err == nil && turn.Status == store.StatusFailed {
			t.Fatalf("the turn failed while waiting on a lock: %s", turn.LastError)
		}
		return obs.get("lock_wait") >= 2, fmt.Sprintf("outcomes %s, turn %+v, %v", obs, turn.Status, err)
	})
	if turn, err := e.store.GetTurn(e.ctx, "alice", "t1"); err != nil || turn.Status != store.StatusPending || turn.Attempts != 0 {
		t.Fatalf("turn while locked = %+v, %v; want pending, no attempt counted", turn, err)
	}

	if err := holder.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	st := e.waitDone(1)
	if st.TurnsProcessed != 1 {
		t.Fatalf("stats = %+v; want the turn processed", st)
	}
	if f, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || f.Value != "Rome" {
		t.Fatalf("location = %+v, %v", f, err)
	}
}

// TestRelativeDatesAreTheTurnsOwnDay: a turn's relative dates are read in
// the UTC offset its frontend sent, ingested and replayed: "my birthday is
// tomorrow" at 23:55 in New York (04:55 UTC the next day) is the next day
// in New York, at 00:30 in Tokyo (15:30 UTC the day before) the next day
// in Tokyo (a multi-device walk: both a day off, read on the UTC date).
func TestRelativeDatesAreTheTurnsOwnDay(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	newYork, tokyo := time.FixedZone("", -5*3600), time.FixedZone("", 9*3600)
	e.publish(events.Turn{ID: "b1", UserID: "ny", UserMessage: "My birthday is tomorrow", AssistantResponse: "Happy early birthday!",
		Timestamp: time.Date(2026, 12, 1, 23, 55, 0, 0, newYork)})
	e.publish(events.Turn{ID: "b1", UserID: "tokyo", UserMessage: "My birthday is tomorrow", AssistantResponse: "Happy early birthday!",
		Timestamp: time.Date(2026, 12, 2, 0, 30, 0, 0, tokyo)})
	e.publish(events.Turn{ID: "b2", UserID: "ny", UserMessage: "I turned 30 yesterday", AssistantResponse: "Congratulations!",
		Timestamp: time.Date(2025, 12, 31, 20, 0, 0, 0, newYork)})
	check := func(when string) {
		t.Helper()
		for _, want := range []struct{ user, key, value string }{
			{"ny", "birthday", "12-02"}, {"tokyo", "birthday", "12-03"}, {"ny", "birth_year", "1995"},
		} {
			if f, err := e.store.Fact(e.ctx, want.user, want.key); err != nil || f.Value != want.value {
				t.Errorf("%s: %s's %s = %q, %v; want %s", when, want.user, want.key, f.Value, err, want.value)
			}
		}
	}
	e.waitDone(3)
	check("ingested")
	e.replay(worker.ReplayConfig{Reset: true})
	check("after replay --reset")
}
