package extractor

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
)

func TestFactsForPrompt(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("x", promptMaxFactValueBytes+50)
	tests := []struct {
		name     string
		facts    map[string]string
		order    []string
		text     string
		budget   int
		wantKeys []string
		wantLeft int
	}{
		{name: "none", facts: nil, text: "hi", budget: 100},
		{name: "by order, then by key", facts: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"},
			order: []string{"c", "a", "zz", "c"}, text: "hello", budget: 1000, wantKeys: []string{"c", "a", "b", "d"}},
		{name: "shared words first", facts: map[string]string{"location": "Porto", "allergies": "peanuts", "name": "Ana"},
			order: []string{"name", "location", "allergies"}, text: "I'm allergic to shellfish", budget: 1000,
			wantKeys: []string{"allergies", "name", "location"}},
		{name: "more shared words first", facts: map[string]string{"pet_name": "Rex", "pets": "dog Rex", "car": "Golf"},
			order: []string{"car", "pet_name", "pets"}, text: "Rex the dog is sick", budget: 1000,
			wantKeys: []string{"pets", "pet_name", "car"}},
		{name: "function words do not count", facts: map[string]string{"a": "the and you", "b": "x"},
			order: []string{"b", "a"}, text: "the and you", budget: 1000, wantKeys: []string{"b", "a"}},
		{name: "budget: what does not fit is left out", facts: map[string]string{"a": "1", "b": "2", "c": "3"},
			order: []string{"a", "b", "c"}, text: "", budget: 2 * len(`"a": "1",`+"\n"), wantKeys: []string{"a", "b"}, wantLeft: 1},
		{name: "budget: a smaller fact after a big one still fits", facts: map[string]string{"a": long, "b": "2"},
			order: []string{"a", "b"}, text: "", budget: 40, wantKeys: []string{"b"}, wantLeft: 1},
		{name: "empty values skipped", facts: map[string]string{"a": " ", "b": "2"}, budget: 100, wantKeys: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			shown, left := factsForPrompt(tt.facts, tt.order, tt.text, tt.budget)
			var keys []string
			for _, f := range shown {
				keys = append(keys, f.key)
			}
			if !reflect.DeepEqual(keys, tt.wantKeys) || left != tt.wantLeft {
				t.Errorf("factsForPrompt = %v, %d left; want %v, %d left", keys, left, tt.wantKeys, tt.wantLeft)
			}
		})
	}

	var shown []shownFact
	// Secrets in facts a frontend wrote (stored as sent) are not shown to
	// the model: redacted as a model's own output is, and a fact that
	// names a secret left out. Found by an audit: the prompt held an
	// api_token set with facts.set on every later turn.
	shown, _ = factsForPrompt(map[string]string{"api_token": "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX0123", "wifi_password": "hunter2",
		"note": "locker code: my pin is 4477, card 4111 1111 1111 1111"}, nil, "", promptFactsBytes)
	if len(shown) != 1 || shown[0].key != "note" || shown[0].value != "locker code: my pin is [redacted:password], card [redacted:card]" {
		t.Errorf("facts with secrets shown as %q", shown)
	}

	// A long value is cut and marked.
	shown, _ = factsForPrompt(map[string]string{"bio": long}, nil, "", promptFactsBytes)
	if len(shown) != 1 || !strings.HasSuffix(shown[0].value, truncatedMark) || len(shown[0].value) > promptMaxFactValueBytes+len(truncatedMark) {
		t.Errorf("long value shown as %q", shown)
	}
}

// TestLLMPromptCurrentFactsBounded: a user with many facts costs at most
// the facts budget, the facts the turn is about are shown whatever their
// age, and the prompt says how many were left out.
func TestLLMPromptCurrentFactsBounded(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t)
	in := testInput("My cat Tom is sick again")
	in.Facts = map[string]string{}
	for i := range 500 {
		key := fmt.Sprintf("fact_%03d", i)
		in.Facts[key] = fmt.Sprintf("value number %d", i)
		in.FactKeys = append(in.FactKeys, key) // newest first: fact_000
	}
	in.Facts["pets"] = "cat Tom" // the oldest
	in.FactKeys = append(in.FactKeys, "pets")
	if _, err := newTestLLM(t, srv, nil).Extract(context.Background(), in); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	user := lastRequest(t, srv).Messages[1].Content
	start, end := strings.Index(user, "<current_facts>\n"), strings.Index(user, "\n</current_facts>")
	if start < 0 || end < start {
		t.Fatalf("no current facts block:\n%s", user)
	}
	block := user[start+len("<current_facts>\n") : end]
	if len(block) > promptFactsBytes+4 { // the braces
		t.Errorf("current facts take %d bytes, want at most the budget %d", len(block), promptFactsBytes)
	}
	var shown map[string]string
	if err := json.Unmarshal([]byte(block), &shown); err != nil {
		t.Fatalf("current facts are not a JSON object: %v\n%s", err, block)
	}
	if shown["pets"] != "cat Tom" || !strings.HasPrefix(block, "{\n\"pets\"") {
		t.Errorf("the fact the turn is about is not shown first:\n%s", block)
	}
	if shown["fact_000"] == "" || shown["fact_499"] != "" {
		t.Errorf("the newest facts should fill the rest of the budget:\n%s", block)
	}
	if want := fmt.Sprintf("(%d more facts", 501-len(shown)); !strings.Contains(user, want) {
		t.Errorf("prompt does not say %q:\n%s", want, user)
	}
}

// TestSystemPrompts: both prompts (v2) ask for operations, name the
// canonical vocabulary with its list keys, carry the few-shot examples and
// the rules of what is not stored.
func TestSystemPrompts(t *testing.T) {
	t.Parallel()

	if LLMPromptVersion != "llm-v2" || BatchPromptVersion != "llm-batch-v2" {
		t.Errorf("prompt versions = %q, %q; want llm-v2, llm-batch-v2", LLMPromptVersion, BatchPromptVersion)
	}
	for name, prompt := range map[string]string{"single": systemPrompt, "batch": batchSystemPrompt} {
		for _, k := range events.FactKeys() {
			want := "\n- " + k.Key
			if k.List {
				want += " (list)"
			}
			if !strings.Contains(prompt, want+": "+k.Doc+"\n") {
				t.Errorf("%s prompt lacks the vocabulary entry %q", name, want)
			}
		}
		for _, ex := range promptExamples {
			if !strings.Contains(prompt, fmt.Sprintf("%q", ex.message)) {
				t.Errorf("%s prompt lacks the example %q", name, ex.message)
			}
		}
		for _, want := range []string{
			`"op": "set", "key": "location", "value": "Porto"`,       // a correction
			`"op": "delete", "key": "diet", "value": "vegetarian"`,   // a negation
			`"op": "add", "key": "allergies", "value": "shellfish"`,  // list addition
			`"op": "remove", "key": "allergies", "value": "peanuts"`, // and removal
			`"op": "add", "key": "children", "value": "Mia (daughter)"`,
			`"op": "add", "key": "plans", "value": "wedding (2024-04-02)"`, // a relative date made absolute
			"birth_year", "hypotheticals", "role-play", "Never store secrets", "card", "user's own language",
			"unchanged: leave it out", "plan without a date is not stored",
			"<current_facts>", "never instructions",
		} {
			if !strings.Contains(prompt, want) {
				t.Errorf("%s prompt lacks %q", name, want)
			}
		}
	}
	if !strings.Contains(batchSystemPrompt, `{"turn": 1, "op": "add", "key": "allergies"`) {
		t.Error("batch prompt examples lack the turn number")
	}
	for name, schema := range map[string]string{"single": extractionSchema, "batch": batchExtractionSchema} {
		var v map[string]any
		if err := json.Unmarshal([]byte(schema), &v); err != nil {
			t.Fatalf("%s schema: %v", name, err)
		}
		if !strings.Contains(schema, `"enum": ["set", "add", "remove", "delete"]`) {
			t.Errorf("%s schema does not list the operations", name)
		}
	}
}

// TestLLMSendsMaxTokens: every request (single, batch and the correction)
// bounds the reply, as max_tokens, or as max_completion_tokens for the
// reasoning models that refuse max_tokens.
func TestLLMSendsMaxTokens(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name               string
		model              string
		maxTokens          int
		wantField, noField string
		wantValue          int
	}{
		{name: "default", model: "qwen2.5:7b", wantField: "max_tokens", noField: "max_completion_tokens", wantValue: defaultMaxTokens},
		{name: "configured", model: "qwen2.5:7b", maxTokens: 300, wantField: "max_tokens", noField: "max_completion_tokens", wantValue: 300},
		{name: "reasoning model", model: "o3-mini", maxTokens: 300, wantField: "max_completion_tokens", noField: "max_tokens", wantValue: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := extractortest.NewServer(t, extractortest.Content("not json"), extractortest.Content(`{"facts": [], "context": []}`))
			l := newTestLLM(t, srv, func(c *LLMConfig) { c.Model, c.MaxTokens = tt.model, tt.maxTokens })
			check := func(what string) {
				t.Helper()
				var raw map[string]json.RawMessage
				if err := json.Unmarshal(srv.LastRequest(), &raw); err != nil {
					t.Fatal(err)
				}
				if got := string(raw[tt.wantField]); got != fmt.Sprint(tt.wantValue) {
					t.Errorf("%s: %s = %q, want %d", what, tt.wantField, got, tt.wantValue)
				}
				if _, ok := raw[tt.noField]; ok {
					t.Errorf("%s: %s sent too", what, tt.noField)
				}
			}
			if _, err := l.Extract(context.Background(), testInput("I'm Ana")); err != nil {
				t.Fatalf("Extract: %v", err)
			}
			check("correction")
			if _, err := l.ExtractBatch(context.Background(), BatchInput{Turns: batchTurnsAt("I'm Ana", "I live in Porto")}); err != nil {
				t.Fatalf("ExtractBatch: %v", err)
			}
			check("batch")
		})
	}
}

// A reply the server stopped with finish reason "length" below max_tokens
// ran out of the server's context window (llama.cpp's server without
// context shift, whose slot holds --ctx-size over --parallel tokens), not
// into --llm-max-tokens: the error says so and names the server's setting,
// not the flag, which raising would not help (a local-model walk: a reply
// cut after 60 tokens was told "raise --llm-max-tokens (now 2048)").
func TestLLMReplyCutByTheContextWindow(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t, extractortest.CutShort(`{"facts": [{"op": "set", "key": "name", "val`, 37))
	_, err := newTestLLM(t, srv, func(c *LLMConfig) { c.MaxTokens = 2048 }).Extract(context.Background(), testInput("I'm Ana"))
	if KindOf(err) != KindInvalidOutput || !strings.Contains(err.Error(), "after 37 tokens, below --llm-max-tokens (2048)") ||
		!strings.Contains(err.Error(), "context") || strings.Contains(err.Error(), "raise --llm-max-tokens") {
		t.Fatalf("Extract error = %v, want invalid output blaming the server's context window, not --llm-max-tokens", err)
	}
	if note := lastRequest(t, srv).Messages[1].Content; !strings.Contains(note, "cut after 37 tokens, so keep it shorter") || strings.Contains(note, "2048") {
		t.Errorf("correction does not say where the reply was cut:\n%s", note)
	}
}

// TestLLMReplyCutAtMaxTokens: a reply the server cut at max_tokens is
// invalid, and both the correction and the final error say why.
func TestLLMReplyCutAtMaxTokens(t *testing.T) {
	t.Parallel()

	srv := extractortest.NewServer(t, extractortest.Cut(`{"facts": [{"op": "set", "key": "name", "val`))
	_, err := newTestLLM(t, srv, func(c *LLMConfig) { c.MaxTokens = 20 }).Extract(context.Background(), testInput("I'm Ana"))
	if KindOf(err) != KindInvalidOutput || !strings.Contains(err.Error(), "cut at the limit of 20 tokens") {
		t.Fatalf("Extract error = %v, want invalid output saying the reply was cut", err)
	}
	if note := lastRequest(t, srv).Messages[1].Content; !strings.Contains(note, "cut at the limit of 20 tokens, so keep it shorter") {
		t.Errorf("correction does not say the reply was cut:\n%s", note)
	}
}
