package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// promptRecorder is a fake model that answers each turn from a script
// (user message → reply "facts") and records the user prompt each turn was
// sent with.
type promptRecorder struct {
	srv     *extractortest.Server
	mu      sync.Mutex
	prompts map[string]string // by the turn's user message
}

func newPromptRecorder(t *testing.T, script map[string]string) *promptRecorder {
	r := &promptRecorder{srv: extractortest.NewServer(t), prompts: map[string]string{}}
	r.srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		prompt := req.Messages[len(req.Messages)-1].Content
		msg, _, ok := extractor.PromptTurn(prompt)
		if !ok {
			return extractortest.Error(400, "no turn in the prompt")
		}
		r.mu.Lock()
		r.prompts[msg] = prompt
		r.mu.Unlock()
		facts := script[msg]
		if facts == "" {
			facts = "[]"
		}
		return extractortest.Content(`{"facts": ` + facts + `, "context": []}`)
	})
	return r
}

func (r *promptRecorder) prompt(t *testing.T, msg string) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.prompts[msg]
	if !ok {
		t.Fatalf("no request for the turn %q", msg)
	}
	return p
}

func (r *promptRecorder) llm(t *testing.T) *extractor.LLM {
	l, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: r.srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// checkPrompt fails unless prompt has every want and none of unwanted.
func checkPrompt(t *testing.T, what, prompt string, want, unwanted []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(prompt, w) {
			t.Errorf("%s: prompt lacks %q:\n%s", what, w, prompt)
		}
	}
	for _, u := range unwanted {
		if strings.Contains(prompt, u) {
			t.Errorf("%s: prompt has %q:\n%s", what, u, prompt)
		}
	}
}

// TestSingleTurnRequestHasPriorTurnsAndCurrentFacts: without a debounce,
// each turn is its own job and request, and still carries the earlier
// turns of its conversation (from Postgres) and the user's current facts
// with their values.
func TestSingleTurnRequestHasPriorTurnsAndCurrentFacts(t *testing.T) {
	e := setup(t)
	model := newPromptRecorder(t, map[string]string{
		"I live in Lisbon.":  `[{"op": "set", "key": "city", "value": "Lisbon"}]`,
		"I'm a vegetarian.":  `[{"op": "set", "key": "diet", "value": "vegetarian"}]`,
		"Any beaches there?": `[]`,
	})
	e.start(model.llm(t), nil)
	for i, msg := range []string{"I live in Lisbon.", "I'm a vegetarian.", "Any beaches there?"} {
		e.publish(events.Turn{ID: fmt.Sprintf("t%d", i), UserID: "alice", ConversationID: "c1", UserMessage: msg,
			AssistantResponse: "noted " + msg, Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		e.waitDone(int64(i + 1))
	}
	e.publish(events.Turn{ID: "other", UserID: "alice", UserMessage: "Hello.", Timestamp: t0.Add(time.Hour)})
	e.waitDone(4)

	if f, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || f.Value != "Lisbon" {
		t.Fatalf("fact location = %+v, %v; want Lisbon (the model's city, canonical)", f, err)
	}
	checkPrompt(t, "first turn", model.prompt(t, "I live in Lisbon."),
		[]string{"The user has no stored facts yet."}, []string{"<prior_turns>", "<current_facts>"})
	checkPrompt(t, "third turn", model.prompt(t, "Any beaches there?"), []string{
		"<prior_turns>", `"user_message":"I live in Lisbon."`, `"assistant_response":"noted I'm a vegetarian."`,
		"<current_facts>", `"location": "Lisbon"`, `"diet": "vegetarian"`,
	}, nil)
	// A turn without a conversation has no earlier turns, but the facts.
	checkPrompt(t, "turn without a conversation", model.prompt(t, "Hello."),
		[]string{`"location": "Lisbon"`, `"diet": "vegetarian"`}, []string{"<prior_turns>"})
}

// TestLaterTurnsOfAJobSeeEarlierOnes: in a job of several turns, a later
// turn's request carries what the earlier turns of the job set (not stored
// yet: a job stores at its end) and those turns as earlier turns of the
// conversation.
func TestLaterTurnsOfAJobSeeEarlierOnes(t *testing.T) {
	e := setup(t)
	model := newPromptRecorder(t, map[string]string{
		"I live in Oslo.":     `[{"op": "set", "key": "location", "value": "Oslo"}]`,
		"I work at Acme.":     `[{"op": "set", "key": "employer", "value": "Acme"}]`,
		"Lunch near work?":    `[]`,
		"I moved to Bergen.":  `[{"op": "set", "key": "location", "value": "Bergen"}]`,
		"Nice weather today.": `[]`,
		"Where do I live now": `[]`,
	})
	msgs := []string{"I live in Oslo.", "I work at Acme.", "Lunch near work?", "I moved to Bergen.", "Nice weather today.", "Where do I live now"}
	for i, m := range msgs {
		data, err := json.Marshal(events.Turn{ID: fmt.Sprintf("b%d", i), UserID: "bob", ConversationID: "c2", UserMessage: m,
			Timestamp: t0.Add(time.Duration(i) * time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		msg := &nats.Msg{Subject: events.TurnSubject(e.prefix, "bob"), Data: data, Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("b%d", i))
		if _, err := e.js.PublishMsg(e.ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// Kept while the test runs: an idle ephemeral consumer goes after 5 s.
	cons, err := e.js.CreateConsumer(e.ctx, e.stream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: events.TurnSubjects(e.prefix), InactiveThreshold: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var batch []jetstream.Msg
	for len(batch) < len(msgs) {
		fetched, err := cons.Fetch(len(msgs)-len(batch), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range fetched.Messages() {
			batch = append(batch, m)
		}
		if fetched.Error() != nil {
			t.Fatal(fetched.Error())
		}
	}
	// One job for the whole batch, so every turn is extracted by one run.
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: model.llm(t), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, JobRetryBase: 10 * time.Millisecond, FetchPollInterval: testFetchPoll, FetchCooldown: testFetchCooldown,
		DisableIngest: true, JobSize: len(msgs)})
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
	e.waitDone(int64(len(msgs)))

	checkPrompt(t, "first turn", model.prompt(t, "I live in Oslo."),
		[]string{"The user has no stored facts yet."}, []string{"<prior_turns>"})
	checkPrompt(t, "third turn", model.prompt(t, "Lunch near work?"), []string{
		`"user_message":"I live in Oslo."`, `"user_message":"I work at Acme."`,
		// Newest first: the turn shares no word with either fact.
		"<current_facts>\n{\n\"employer\": \"Acme\",\n\"location\": \"Oslo\"\n}",
	}, nil)
	if _, rest, _ := strings.Cut(model.prompt(t, "Lunch near work?"), "<prior_turns>"); strings.Contains(rest[:strings.Index(rest, "</prior_turns>")], "Lunch") {
		t.Error("third turn: the turn itself is among its earlier turns")
	}
	// The location the job's fourth turn set; only the last 4 earlier
	// turns (the worker's window).
	checkPrompt(t, "sixth turn", model.prompt(t, "Where do I live now"),
		[]string{`"location": "Bergen"`, `"employer": "Acme"`, `"user_message":"I work at Acme."`, `"user_message":"Nice weather today."`},
		[]string{`"location": "Oslo"`, `"user_message":"I live in Oslo."`})

	if _, err := e.store.Fact(e.ctx, "bob", "employer"); err != nil {
		t.Errorf("fact employer: %v", err)
	}
}
