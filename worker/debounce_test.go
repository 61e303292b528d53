package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// burstReply is a batch extraction for a burst of three turns. Its keys are
// free ones (single-valued whatever the vocabulary holds).
const burstReply = `{"facts":[{"turn":1,"key":"favorite_animal","value":"cat"},{"turn":3,"key":"favorite_animal_name","value":"Tom"}],"context":[{"turn":2,"q":"What do I feed my cat?","a":"Fish"}]}`

func (e *env) publishBurst(conv string) []string {
	e.t.Helper()
	var ids []string
	for i, msg := range []string{"I have a cat.", "What should I feed it?", "Its name is Tom."} {
		id := fmt.Sprintf("%s-%d", conv, i+1)
		e.publish(events.Turn{ID: id, UserID: "alice", ConversationID: conv, UserMessage: msg,
			AssistantResponse: "ok", Timestamp: t0.Add(time.Duration(i) * time.Second)})
		ids = append(ids, id)
	}
	return ids
}

// TestShutdownDuringABurstLeavesNoTurnPending: a worker is stopped (its
// grace period already over, as when SIGTERM's shutdown timeout runs out)
// while a debounced burst's model call runs. The job is handed back; after a
// restart the burst must be extracted, not left pending behind the claim of
// the job that was handed back.
func TestShutdownDuringABurstLeavesNoTurnPending(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var (
		blocking atomic.Bool
		arrived  = make(chan struct{}, 1)
		release  = make(chan struct{})
		once     sync.Once
	)
	unblock := func() { once.Do(func() { blocking.Store(false); close(release) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for requests in flight
	blocking.Store(true)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		if blocking.Load() {
			select {
			case arrived <- struct{}{}:
			default:
			}
			<-release
		}
		return extractortest.Content(burstReply)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	ids := e.publishBurst("c1")

	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: llm, Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, JobRetryBase: 10 * time.Millisecond, FetchPollInterval: testFetchPoll, FetchCooldown: testFetchCooldown,
		RetryBackoff: 50 * time.Millisecond, ExtractDebounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the burst's model call did not start")
	}
	over, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Stop(over); err != nil {
		t.Fatal(err)
	}
	unblock()
	for _, id := range ids {
		if turn, err := e.store.GetTurn(e.ctx, "alice", id); err != nil || turn.Status != store.StatusPending {
			t.Fatalf("turn %s after the shutdown = %+v, %v; want it pending", id, turn, err)
		}
	}

	e.start(llm, func(c *worker.Config) { c.ExtractDebounce = 100 * time.Millisecond })
	e.waitFor("the burst processed after the restart", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsProcessed == 3, fmt.Sprintf("%+v %v", st, err)
	})
	if f, err := e.store.Fact(e.ctx, "alice", "favorite_animal_name"); err != nil || f.EventID != ids[2] {
		t.Fatalf("fact favorite_animal_name = %+v, %v; want it from %s", f, err, ids[2])
	}
}

// TestDuplicateIDsInOneDebouncedBatch: events sharing an id land in one
// ingest batch (published with different Nats-Msg-Ids, so JetStream keeps
// them all): two conversations of one user, two users, and an identical
// re-publish. Every recorded turn must be extracted under its own user and
// conversation, and every event is either recorded or dead-lettered with a
// reason; the identical copy is neither.
func TestDuplicateIDsInOneDebouncedBatch(t *testing.T) {
	e := setup(t)
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: events.DeadLetterStream(e.stream), Subjects: []string{events.DeadLetterSubjects(e.prefix)}}); err != nil {
		t.Fatal(err)
	}
	evs := []events.Turn{
		{ID: "dup", UserID: "alice", ConversationID: "c1", UserMessage: "I live in Paris."},
		{ID: "dup", UserID: "alice", ConversationID: "c2", UserMessage: "I live in Rome."},
		{ID: "shared", UserID: "bob", ConversationID: "c1", UserMessage: "I live in Oslo."},
		{ID: "shared", UserID: "carol", ConversationID: "c9", UserMessage: "I live in Lima."},
		{ID: "again", UserID: "alice", ConversationID: "c3", UserMessage: "I like tea."},
		{ID: "again", UserID: "alice", ConversationID: "c3", UserMessage: "I like tea."},
	}
	for i, ev := range evs {
		ev.Timestamp = t0
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		msg := &nats.Msg{Subject: events.TurnSubject(e.prefix, ev.UserID), Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("copy-%d", i))
		if _, err := e.js.PublishMsg(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// An ephemeral consumer idle for InactiveThreshold (5 s by default) is
	// deleted by the server: the extraction below may take longer than
	// that on a busy machine (a CI run found it gone).
	cons, err := e.js.CreateConsumer(e.ctx, e.stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: events.TurnSubjects(e.prefix), InactiveThreshold: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var batch []jetstream.Msg
	for len(batch) < len(evs) {
		msgs, err := cons.Fetch(len(evs)-len(batch), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range msgs.Messages() {
			batch = append(batch, m)
		}
		if msgs.Error() != nil {
			t.Fatal(msgs.Error())
		}
	}

	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, JobRetryBase: 10 * time.Millisecond, FetchPollInterval: testFetchPoll, FetchCooldown: testFetchCooldown,
		DisableIngest: true, ExtractDebounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	if err := worker.IngestBatch(e.ctx, w, batch); err != nil {
		t.Fatal(err)
	}
	e.waitFor("every recorded turn extracted", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "")
		return err == nil && st.TurnsPending == 0 && st.TurnsReceived > 0, fmt.Sprintf("%+v %v", st, err)
	})

	// What the dead-letter stream holds, by user and conversation.
	dl, err := e.js.Stream(e.ctx, events.DeadLetterStream(e.stream))
	if err != nil {
		t.Fatal(err)
	}
	info, err := dl.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	rejected := map[string]string{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := dl.GetMsg(e.ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.Turn
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		rejected[ev.UserID+"/"+ev.ConversationID] = m.Header.Get(events.HeaderReason)
	}
	// Event ids are per user: bob's and carol's "shared" are two turns,
	// neither a duplicate of the other.
	for _, k := range []string{"bob/c1", "carol/c9"} {
		if reason, dead := rejected[k]; dead {
			t.Errorf("%s dead-lettered (%s): another user's id is not a conflict", k, reason)
		}
	}
	// Each distinct event: recorded (and processed, under its own user and
	// conversation) or dead-lettered with a reason.
	for _, ev := range evs[:5] {
		recorded := false
		if items, err := e.store.RecentContext(e.ctx, ev.UserID, 10); err == nil {
			for _, it := range items {
				recorded = recorded || (it.EventID == ev.ID && it.ConversationID == ev.ConversationID)
			}
		} else {
			t.Fatal(err)
		}
		reason, dead := rejected[ev.UserID+"/"+ev.ConversationID]
		switch {
		case recorded && dead:
			t.Errorf("%s/%s of %s is both recorded and dead-lettered", ev.ID, ev.ConversationID, ev.UserID)
		case !recorded && !dead:
			t.Errorf("%s/%s of %s is neither recorded nor dead-lettered", ev.ID, ev.ConversationID, ev.UserID)
		case dead && reason == "":
			t.Errorf("%s/%s of %s dead-lettered without a reason", ev.ID, ev.ConversationID, ev.UserID)
		}
	}
	if _, dead := rejected["alice/c1"]; dead {
		t.Error("the first event with id dup was dead-lettered; the later conflicting one should be")
	}
	if st, err := e.store.Stats(e.ctx, "alice"); err != nil || st.TurnsReceived != 2 || st.TurnsProcessed != 2 {
		t.Errorf("alice stats = %+v, %v; want her first dup and one copy of again, processed", st, err)
	}
	if ci, err := cons.Info(e.ctx); err != nil || ci.NumAckPending != 0 {
		t.Errorf("consumer info = %+v, %v; want every event acknowledged or terminated", ci, err)
	}
}

// TestDebouncedJobIsAvailableForItsTime: a debounced turn's job waits its
// debounce as available with a future scheduled_at, as River's own short
// snoozes do, not as scheduled: River's scheduler makes scheduled jobs
// available only every 5 s, so a debounce of 2 s ran 2 to 7 s after the
// turn (a CI-time review).
func TestDebouncedJobIsAvailableForItsTime(t *testing.T) {
	e := setup(t)
	e.start(aliceModel(t, func(int) *extractortest.Reply { return nil }), func(c *worker.Config) { c.ExtractDebounce = 2 * time.Second })
	e.publish(events.Turn{ID: "d1", UserID: "alice", ConversationID: "c1", UserMessage: "My name is Alice."})
	var first string
	eventstest.Eventually(t, "the debounced job", time.Minute, func() (bool, string) {
		if jobs := e.extractJobs(); len(jobs) > 0 {
			first = string(jobs[0].State)
			return true, first
		}
		return false, "no job yet"
	})
	if first == "scheduled" {
		t.Fatalf("a debounced job waits as %s, for River's scheduler", first)
	}
	if st := e.waitDone(1); st.TurnsProcessed != 1 {
		t.Fatalf("stats %+v, want the turn processed", st)
	}
}
