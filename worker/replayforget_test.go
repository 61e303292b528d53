package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// snapshot is a user's memory in comparable form.
func (e *env) snapshot(user string) string {
	e.t.Helper()
	facts, err := e.store.Facts(e.ctx, user, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	items, err := e.store.RecentContext(e.ctx, user, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	s := ""
	for _, f := range facts {
		s += fmt.Sprintf("fact %s=%s@%s;", f.Key, f.Value, f.EventID)
	}
	for _, it := range items {
		s += fmt.Sprintf("ctx %s|%s|%s;", it.Question, it.Answer, it.EventID)
	}
	return s
}

func (e *env) seedConversation() {
	e.t.Helper()
	for u, user := range []string{"alice", "bob"} {
		for i := range 10 {
			e.publish(events.Turn{
				ID: fmt.Sprintf("%s-%d", user, i), UserID: user,
				UserMessage: fmt.Sprintf("I live in city%d. Note %d.", i%3, i), AssistantResponse: "ok",
				Timestamp: t0.Add(time.Duration(i*10+u) * time.Minute),
			})
		}
	}
	e.waitDone(20)
}

func (e *env) replay(cfg worker.ReplayConfig) worker.ReplayProgress {
	e.t.Helper()
	cfg.JetStream, cfg.Store, cfg.Prefix, cfg.Stream = e.js, e.store, e.prefix, e.stream
	cfg.BatchSize = 7 // several batches, several jobs
	p, err := worker.Replay(e.ctx, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("replayed turns processed", func() (bool, string) {
		n, err := e.store.PendingTurns(e.ctx, nil)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	return p
}

func TestReplayRebuildsTheSameMemory(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedConversation()
	alice, bob := e.snapshot("alice"), e.snapshot("bob")
	if alice == "" {
		t.Fatal("nothing stored for alice")
	}

	dry := e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: true, DryRun: true})
	if dry.Read != 10 || e.snapshot("alice") != alice {
		t.Fatalf("dry run read %d and changed memory: %+v", dry.Read, dry)
	}

	p := e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: true})
	if p.Read != 10 || p.Total != 10 || p.Enqueued != 10 || p.Removed.Context != 10 {
		t.Fatalf("replay progress = %+v", p)
	}
	if got := e.snapshot("alice"); got != alice {
		t.Fatalf("rebuilt memory differs:\n got  %s\n want %s", got, alice)
	}
	if got := e.snapshot("bob"); got != bob {
		t.Fatal("replay of alice changed bob")
	}

	// All users, without reset, twice: still the same memory.
	for range 2 {
		p = e.replay(worker.ReplayConfig{})
		if p.Read != 20 {
			t.Fatalf("full replay read %d, want 20", p.Read)
		}
	}
	if e.snapshot("alice") != alice || e.snapshot("bob") != bob {
		t.Fatal("replaying twice changed memory")
	}
	st, err := e.store.Stats(e.ctx, "")
	if err != nil || st.ContextItems != 20 || st.TurnsProcessed != 20 {
		t.Fatalf("stats after replays = %+v, %v", st, err)
	}
}

func TestForgetLeavesNothingOfTheUser(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedConversation()
	bob := e.snapshot("bob")
	// A rejected event of alice's lands in the dead-letter stream.
	if _, err := e.js.Publish(e.ctx, events.TurnSubject(e.prefix, "alice"), []byte(`{"id":"bad"}`)); err != nil {
		t.Fatal(err)
	}
	e.waitForAcked()

	res, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if res.StreamEvents != 11 || res.DeadLetters != 1 || res.Turns != 10 || res.Context != 10 || res.Facts != 1 || res.Jobs == 0 {
		t.Fatalf("forget result = %+v", res)
	}
	var leftovers int
	err = e.store.Pool().QueryRow(e.ctx, `SELECT
		(SELECT count(*) FROM facts WHERE user_id = 'alice') +
		(SELECT count(*) FROM fact_history WHERE user_id = 'alice') +
		(SELECT count(*) FROM context WHERE user_id = 'alice') +
		(SELECT count(*) FROM turns WHERE user_id = 'alice') +
		(SELECT count(*) FROM river_job WHERE args->>'user_id' = 'alice')`).Scan(&leftovers)
	if err != nil || leftovers != 0 {
		t.Fatalf("rows of alice left: %d (%v)", leftovers, err)
	}
	for _, stream := range []string{e.stream, events.DeadLetterStream(e.stream)} {
		s, err := e.js.Stream(e.ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(10) // bob's turns
		if stream != e.stream {
			want = 0
		}
		if info.State.Msgs != want {
			t.Fatalf("%s holds %d messages, want %d", stream, info.State.Msgs, want)
		}
	}
	// A replay cannot bring alice back, and bob is untouched.
	e.replay(worker.ReplayConfig{Reset: true})
	if s := e.snapshot("alice"); s != "" {
		t.Fatalf("alice came back after replay: %s", s)
	}
	if e.snapshot("bob") != bob {
		t.Fatal("forgetting alice changed bob")
	}
	if st, _ := e.store.Stats(e.ctx, "alice"); st.TurnsReceived+st.Facts+st.ContextItems != 0 || st.LastProcessedAt != nil || len(st.LLMUsage) != 0 {
		t.Fatalf("alice stats = %+v", st)
	}
}

// TestResetRefusesMemoryTheStreamNoLongerHolds: a replay --reset that
// would delete memory extracted from turns whose events the stream no
// longer holds (retention limits dropped them, an operator deleted them,
// the stream was created again) is refused before it deletes anything;
// with AllowLoss it resets, and says what is gone for good. Before, the
// reset deleted that memory and the replay could not rebuild it (an
// operator's walk lost two facts for good, exit 0).
func TestResetRefusesMemoryTheStreamNoLongerHolds(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	e.seedConversation()
	alice := e.snapshot("alice")
	// Alice's turns are sequences 1-10, bob's 11-20. alice-2's event (3)
	// is published again past the duplicate window (21: ingest takes it
	// for the turn it recorded). Retention drops the head of the stream
	// (alice-0), an operator deletes alice-2's first copy, alice-4 and
	// bob-0 (out of this replay's scope) inside it: alice-0 and alice-4
	// are lost, alice-2 is rebuilt from its copy.
	copied := e.event(3)
	if _, err := e.js.Publish(e.ctx, copied.Subject, copied.Data); err != nil {
		t.Fatal(err)
	}
	e.waitForAcked()
	e.deleteEvents(1, 3, 5, 11)
	cfg := worker.ReplayConfig{JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream, Users: []string{"alice"}, Reset: true}
	_, err := worker.Replay(e.ctx, cfg)
	var lost *worker.UnreplayableError
	if !errors.As(err, &lost) {
		t.Fatalf("reset with an event gone from the stream: %v, want an *UnreplayableError", err)
	}
	if lost.Turns != 2 || lost.Users != 1 || lost.Items < 2 || lost.FirstSeq != 1 || lost.LastSeq != 5 {
		t.Errorf("refusal counts %+v, want alice's two turns at sequences 1 and 5 and their items (not alice-2, published again)", lost.Unreplayable)
	}
	if got := e.snapshot("alice"); got != alice {
		t.Fatalf("a refused reset changed memory:\n got  %s\n want %s", got, alice)
	}
	dry := e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: true, DryRun: true})
	if dry.Unreplayable != lost.Unreplayable {
		t.Errorf("dry run counted %+v, the refusal %+v", dry.Unreplayable, lost.Unreplayable)
	}
	p := e.replay(worker.ReplayConfig{Users: []string{"alice"}, Reset: true, AllowLoss: true})
	if p.Unreplayable != lost.Unreplayable || p.Read != 8 {
		t.Errorf("reset with AllowLoss: %+v, want it to read 8 events and report the loss %+v", p, lost.Unreplayable)
	}
	if got := e.snapshot("alice"); got == alice || strings.Contains(got, "|alice-0;") || strings.Contains(got, "|alice-4;") || !strings.Contains(got, "|alice-2;") {
		t.Errorf("after a reset allowed to lose alice-0's memory: %s", got)
	}

	// A stream deleted and created again holds none of the recorded
	// turns: every one of them is memory no replay rebuilds.
	if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
		t.Fatal(err)
	}
	if _, err := events.EnsureStream(e.ctx, e.js, events.StreamConfig{Stream: e.stream, Prefix: e.prefix}); err != nil {
		t.Fatal(err)
	}
	// Its sequences pass the old ones: alice's old sequences (up to 21) now
	// name carol's events (a review: a check by sequence let the reset
	// delete alice's memory silently).
	for i := range 25 {
		if _, err := e.pub.Publish(e.ctx, events.Turn{ID: fmt.Sprintf("carol-%d", i), UserID: "carol", UserMessage: "Note.", Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = worker.Replay(e.ctx, cfg)
	if !errors.As(err, &lost) || lost.Turns != 8 {
		t.Fatalf("reset over a new, empty stream: %v, want all 8 of alice's remaining turns refused", err)
	}
}

// A replay --reset whose stream lookup fails (nats-server 2.11 and later
// hold it while a forget deletes; here a context ended) says the lookup
// failed, not that the stream does not store the turns: the latter sends
// the operator after a mistyped --stream or --prefix.
func TestReplayResetLookupFailureIsNotAMismatch(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	_, err := worker.Replay(ctx, worker.ReplayConfig{JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream, Reset: true, DryRun: true})
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "does not store") {
		t.Fatalf("replay --reset with its lookup failed: %v; want the lookup's error, not a mismatch", err)
	}
}
