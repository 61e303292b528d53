package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

// scriptedModel is the stand-in for a good model: it answers each
// extraction request with the scripted replies of the turns the request
// asks about. It finds them by their user message inside the delimiters of
// the turn(s) to extract from only (<turn> for one turn, <new_turns> for a
// conversation burst), never in the read-only prior turns, so that a
// prompt that mixed the two up would get the wrong memory. A request it
// cannot place is answered 500 and reported as a test error.
type scriptedModel struct {
	srv    *extractortest.Server
	byText map[string]fuTurn

	mu       sync.Mutex
	asked    map[string]int // turn id → times asked
	unknown  []string
	requests int
	batches  int // requests with several new turns (a conversation burst)
}

// newScriptedModel serves the turns of users.
func newScriptedModel(t testing.TB, users []fuUser) *scriptedModel {
	m := &scriptedModel{srv: extractortest.NewServer(t), byText: map[string]fuTurn{}, asked: map[string]int{}}
	for _, u := range users {
		for _, tr := range u.Turns {
			m.byText[normText(tr.UserMessage)] = tr
		}
	}
	m.srv.SetHandler(m.answer)
	return m
}

func normText(s string) string { return strings.Join(strings.Fields(s), " ") }

// URL is the base URL for LLMConfig.BaseURL.
func (m *scriptedModel) URL() string { return m.srv.URL() }

func (m *scriptedModel) answer(req openai.ChatCompletionRequest) extractortest.Reply {
	var prompt string
	for _, msg := range req.Messages {
		if msg.Role == openai.ChatMessageRoleUser {
			prompt = msg.Content // the last user message carries the turns
		}
	}
	reply, err := m.replyFor(prompt)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests++
	if err != nil {
		m.unknown = append(m.unknown, err.Error())
		return extractortest.Error(http.StatusInternalServerError, "scripted model: "+err.Error())
	}
	body, err := json.Marshal(reply)
	if err != nil {
		m.unknown = append(m.unknown, err.Error())
		return extractortest.Error(http.StatusInternalServerError, err.Error())
	}
	return extractortest.Content(string(body))
}

// replyFor builds the reply to one prompt: the single-turn reply, or the
// batch reply with each item's "turn" set to the number the prompt gave the
// turn.
func (m *scriptedModel) replyFor(prompt string) (fuReply, error) {
	if _, rest, ok := strings.Cut(prompt, "<new_turns>\n"); ok {
		body, _, ok := strings.Cut(rest, "</new_turns>")
		if !ok {
			return fuReply{}, fmt.Errorf("batch prompt without </new_turns>: %.200q", prompt)
		}
		reply := fuReply{Facts: []fuItem{}, Context: []fuQA{}}
		n := 0
		for line := range strings.Lines(body) {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			n++
			var pt struct {
				Turn        int    `json:"turn"`
				UserMessage string `json:"user_message"`
			}
			if err := json.Unmarshal([]byte(line), &pt); err != nil {
				return fuReply{}, fmt.Errorf("batch prompt line %q: %w", line, err)
			}
			if pt.Turn != n {
				return fuReply{}, fmt.Errorf("batch prompt numbers turn %d as %d", n, pt.Turn)
			}
			tr, err := m.lookup(pt.UserMessage)
			if err != nil {
				return fuReply{}, err
			}
			for _, it := range tr.Reply.Facts {
				it.Turn = pt.Turn
				reply.Facts = append(reply.Facts, it)
			}
			reply.Context = append(reply.Context, tr.Reply.Context...)
		}
		if n == 0 {
			return fuReply{}, fmt.Errorf("batch prompt with no new turn: %.200q", prompt)
		}
		m.mu.Lock()
		m.batches++
		m.mu.Unlock()
		return reply, nil
	}
	msg, _, ok := extractor.PromptTurn(prompt)
	if !ok {
		return fuReply{}, fmt.Errorf("no turn to extract from in the prompt: %.200q", prompt)
	}
	tr, err := m.lookup(msg)
	if err != nil {
		return fuReply{}, err
	}
	return fuReply{Facts: append([]fuItem{}, tr.Reply.Facts...), Context: append([]fuQA{}, tr.Reply.Context...)}, nil
}

func (m *scriptedModel) lookup(userMessage string) (fuTurn, error) {
	tr, ok := m.byText[normText(userMessage)]
	if !ok {
		return fuTurn{}, fmt.Errorf("no scripted turn says %q", userMessage)
	}
	m.mu.Lock()
	m.asked[tr.ID]++
	m.mu.Unlock()
	return tr, nil
}

// check fails the test for every request the model could not place, for
// every turn of users it was never asked about (each turn must reach the
// model) and, when bursts is set, if no request was a conversation burst.
func (m *scriptedModel) check(t testing.TB, users []fuUser, bursts bool) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("scripted model: %d requests, %d of them conversation bursts", m.requests, m.batches)
	if bursts && m.batches == 0 {
		t.Error("scripted model: no request was a conversation burst; the batch prompt went untested")
	}
	for _, u := range m.unknown {
		t.Errorf("scripted model: %s", u)
	}
	for _, u := range users {
		for _, tr := range u.Turns {
			if m.asked[tr.ID] == 0 {
				t.Errorf("scripted model: never asked about %s (%q)", tr.ID, tr.UserMessage)
			}
		}
	}
}

// TestScriptedModelReadsOnlyTheTurns: through the real extractor's prompts,
// the scripted model answers about the turn(s) to extract from, never about
// the prior turns sent as read-only background, numbers a burst's items by
// the prompt's turn numbers, and answers an unknown turn with an error it
// reports.
func TestScriptedModelReadsOnlyTheTurns(t *testing.T) {
	t.Parallel()
	users := loadFactUpdates(t)
	byID := map[string]fuTurn{}
	for _, u := range users {
		for _, tr := range u.Turns {
			byID[tr.ID] = tr
		}
	}
	turn := func(id string) extractor.Turn {
		tr := byID[id]
		return extractor.Turn{UserMessage: tr.UserMessage, AssistantResponse: tr.AssistantResponse, Timestamp: tr.Timestamp}
	}
	m := newScriptedModel(t, users)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: m.URL(), Model: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Single turn, with the prior turns of its conversation.
	_, _ = llm.Extract(ctx, extractor.Input{UserID: "ana", Turn: turn("ana-03"),
		Prior: []extractor.Turn{turn("ana-01"), turn("ana-02")}})
	// A burst of two new turns after a prior one.
	_, _ = llm.ExtractBatch(ctx, extractor.BatchInput{UserID: "ben", Turns: []extractor.Turn{turn("ben-07"), turn("ben-08")},
		Prior: []extractor.Turn{turn("ben-01")}})
	m.mu.Lock()
	asked := maps.Clone(m.asked)
	unknown := slices.Clone(m.unknown)
	m.mu.Unlock()
	for _, id := range []string{"ana-03", "ben-07", "ben-08"} {
		if asked[id] == 0 {
			t.Errorf("the model was not asked about %s; asked %v", id, asked)
		}
	}
	for _, id := range []string{"ana-01", "ana-02", "ben-01"} {
		if asked[id] > 0 {
			t.Errorf("the model answered about the prior turn %s; asked %v", id, asked)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("the model could not place a request: %v", unknown)
	}

	// The burst's reply numbers each item by the prompt's turn.
	reply, err := m.replyFor("<new_turns>\n" +
		`{"turn":1,"user_message":"I speak English and Swedish."}` + "\n" +
		`{"turn":2,"user_message":"I'm learning German too, I can hold a conversation now."}` + "\n</new_turns>")
	if err != nil {
		t.Fatal(err)
	}
	want := []fuItem{{Turn: 1, Op: "add", Key: "languages", Value: "English"}, {Turn: 1, Op: "add", Key: "languages", Value: "Swedish"},
		{Turn: 2, Op: "add", Key: "languages", Value: "German"}}
	if !slices.Equal(reply.Facts, want) {
		t.Errorf("burst reply facts = %+v, want %+v", reply.Facts, want)
	}

	if _, err := llm.Extract(ctx, extractor.Input{UserID: "x", Turn: extractor.Turn{UserMessage: "a turn nobody scripted"}}); err == nil {
		t.Error("an unscripted turn was answered")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.unknown) == 0 {
		t.Error("the unscripted turn was not reported")
	}
}
