package extractor

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// snakeKeyRE is what every fact key must look like.
var snakeKeyRE = regexp.MustCompile(`^[a-z0-9]+(?:_[a-z0-9]+)*$`)

var testTurnTime = time.Date(2024, 3, 15, 9, 30, 0, 0, time.FixedZone("CET", 3600))

func TestRulesFacts(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		user      string
		assistant string
		want      map[string]string
	}{
		// Self-statements.
		{name: "name", user: "Hi, my name is Ana.", want: map[string]string{"name": "Ana"}},
		{name: "name keeps case", user: "MY NAME IS ana maria", want: map[string]string{"name": "ana maria"}},
		{name: "name full", user: "My name is Ana Maria da Silva btw", want: map[string]string{"name": "Ana Maria da Silva"}},
		{name: "name with filler", user: "my name is actually Zoë", want: map[string]string{"name": "Zoë"}},
		{name: "called", user: "I'm called Jean-Luc!", want: map[string]string{"name": "Jean-Luc"}},
		{name: "called curly apostrophe", user: "I’m called O'Brien", want: map[string]string{"name": "O'Brien"}},
		{name: "call me", user: "Please call me Jack.", want: map[string]string{"preferred_name": "Jack"}},
		{name: "you can call me", user: "you can call me Al", want: map[string]string{"preferred_name": "Al"}},
		{name: "live in", user: "I live in Lisbon with my husband", want: map[string]string{"location": "Lisbon"}},
		{name: "live in multiword", user: "i live in New York City now", want: map[string]string{"location": "New York City"}},
		{name: "moved to", user: "I moved to Berlin 3 years ago and I love it", want: map[string]string{"location": "Berlin"}},
		{name: "based in", user: "I am based in São Paulo.", want: map[string]string{"location": "São Paulo"}},
		{name: "from is hometown", user: "I'm from Porto, where do you live?", want: map[string]string{"hometown": "Porto"}},
		{name: "work at", user: "I work at Bed Bath and Beyond as a manager", want: map[string]string{"employer": "Bed Bath and Beyond"}},
		{name: "work for", user: "I work for the Center for Disease Control", want: map[string]string{"employer": "the Center for Disease Control"}},
		{name: "employer sentence end", user: "I'm working at Acme Inc. in Berlin", want: map[string]string{"employer": "Acme Inc"}},
		{name: "work as", user: "I work as a software engineer at Google", want: map[string]string{"occupation": "software engineer"}},
		{name: "favorite", user: "my favorite color is blue", want: map[string]string{"favorite_color": "blue"}},
		{name: "favourite multiword", user: "My favourite TV show is The Wire!", want: map[string]string{"favorite_tv_show": "The Wire"}},
		{name: "favorite keeps and", user: "My favorite food is fish and chips", want: map[string]string{"favorite_food": "fish and chips"}},
		{name: "prefer", user: "I prefer tea over coffee, but whatever", want: map[string]string{"preference": "tea over coffee"}},
		{name: "age", user: "I am 34 years old.", want: map[string]string{"age": "34"}},
		{name: "age hyphenated", user: "im 7-years-old", want: map[string]string{"age": "7"}},
		{name: "allergy", user: "I'm allergic to peanuts and shellfish", want: map[string]string{"allergy": "peanuts and shellfish"}},
		{name: "birthday", user: "My birthday is on March 3rd.", want: map[string]string{"birthday": "March 3rd"}},
		{name: "birthday anchored", user: "my birthday is tomorrow!", want: map[string]string{"birthday": "March 16"}},
		{name: "email", user: "My email is ana@example.com.", want: map[string]string{"email": "ana@example.com"}},
		{name: "timezone", user: "my timezone is Europe/Berlin", want: map[string]string{"timezone": "Europe/Berlin"}},
		{name: "wife", user: "My wife's name is Maria and she is a nurse", want: map[string]string{"wife_name": "Maria"}},
		{name: "several statements", user: "Hi! My name is Ana and I live in Lisbon. I work at Feedzai; I'm 29 years old",
			want: map[string]string{"name": "Ana", "location": "Lisbon", "employer": "Feedzai", "age": "29"}},
		{name: "later wins", user: "My name is Ana. Actually, my name is Anna.", want: map[string]string{"name": "Anna"}},
		{name: "later wins across rules", user: "I'm called Bo, well my name is Bob", want: map[string]string{"name": "Bob"}},
		{name: "marker stripped", user: "[facts: name=Bob; location=Oslo] my name is Carol", want: map[string]string{"name": "Carol"}},

		// Not statements about the user, or not plausible values.
		{name: "assistant name ignored", user: "hello", assistant: "My name is Bot and I live in the cloud.", want: map[string]string{}},
		{name: "weather", user: "the weather is 20C", want: map[string]string{}},
		{name: "question", user: "What is my name?", want: map[string]string{}},
		{name: "question clause", user: "is my name is Bob?", want: map[string]string{}},
		{name: "hypothetical", user: "If my name is Bob, then what?", want: map[string]string{}},
		{name: "reported", user: "he said my name is Bob", want: map[string]string{}},
		{name: "negated call me", user: "Please don't call me Bob", want: map[string]string{}},
		{name: "call me back", user: "call me back later", want: map[string]string{}},
		{name: "call me crazy", user: "Call me crazy, but I like rain", want: map[string]string{}},
		{name: "live in a flat", user: "I live in a small flat", want: map[string]string{}},
		{name: "work for myself", user: "I work for myself", want: map[string]string{}},
		{name: "work at night", user: "I work at night", want: map[string]string{}},
		{name: "negated", user: "I don't live in Paris and I'm not from here", want: map[string]string{}},
		{name: "name not a name", user: "My name is not important", want: map[string]string{}},
		{name: "age out of range", user: "I am 200 years old", want: map[string]string{}},
		{name: "bad email", user: "my email is ana at example dot com", want: map[string]string{}},
		{name: "relative birthday", user: "my birthday is next week", want: map[string]string{}},
		{name: "unknown value", user: "my timezone is unknown", want: map[string]string{}},
		{name: "value too long", user: "I prefer " + strings.Repeat("x", 150), want: map[string]string{}},
		{name: "statement past scan limit", user: strings.Repeat("blah ", 2000) + "my name is Ana", want: map[string]string{}},
		{name: "empty", user: "", want: map[string]string{}},
	}
	r := NewRules()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := r.Extract(context.Background(), Input{
				UserID: "u1",
				Turn:   Turn{EventID: "e1", UserMessage: tt.user, AssistantResponse: tt.assistant, Timestamp: testTurnTime},
			})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if !maps.Equal(res.Facts, tt.want) {
				t.Errorf("facts of %q = %v, want %v", tt.user, res.Facts, tt.want)
			}
		})
	}
}

func TestRulesContext(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		user      string
		assistant string
		want      []QA
	}{
		{name: "verbatim pair", user: "  How do I boil an egg?\n", assistant: "Boil it for 8 minutes. ",
			want: []QA{{Q: "How do I boil an egg?", A: "Boil it for 8 minutes."}}},
		{name: "markers stripped", user: "[facts: name=Ana]\nWhat's 2+2?", assistant: "[context: q=x a=y] 4",
			want: []QA{{Q: "What's 2+2?", A: "4"}}},
		{name: "empty answer", user: "thanks", assistant: "", want: []QA{{Q: "thanks", A: ""}}},
		{name: "no pair for empty user message", user: "  ", assistant: "Anything else?", want: nil},
		{name: "no pair for markers only", user: "[facts: a=b]", assistant: "ok", want: nil},
		{name: "invalid utf-8 and NUL sanitised", user: "caf\xe9\x00?", assistant: "a\x00b",
			want: []QA{{Q: "caf\uFFFD?", A: "ab"}}},
	}
	r := NewRules()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := r.Extract(context.Background(), Input{
				Turn: Turn{UserMessage: tt.user, AssistantResponse: tt.assistant, Timestamp: testTurnTime},
			})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if len(res.Context) != len(tt.want) {
				t.Fatalf("context = %q, want %q", res.Context, tt.want)
			}
			for i := range tt.want {
				if res.Context[i] != tt.want[i] {
					t.Errorf("context[%d] = %q, want %q", i, res.Context[i], tt.want[i])
				}
			}
			if res.Usage != (Usage{}) {
				t.Errorf("usage = %+v, want zero", res.Usage)
			}
		})
	}
}

func TestRulesInfoAndContext(t *testing.T) {
	t.Parallel()

	r := NewRules()
	if got, want := r.Info(), (Info{Name: "rules", PromptVersion: "rules-v1"}); got != want {
		t.Errorf("Info() = %+v, want %+v", got, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Extract(ctx, Input{Turn: Turn{UserMessage: "my name is Ana"}})
	if !errors.Is(err, ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Errorf("Extract(cancelled ctx) error = %v, want ErrTransient and context.Canceled", err)
	}

	// The zero value works too.
	res, err := (&Rules{}).Extract(context.Background(), Input{Turn: Turn{UserMessage: "my name is Ana"}})
	if err != nil || res.Facts["name"] != "Ana" {
		t.Errorf("zero Rules: facts = %v, err = %v; want name Ana", res.Facts, err)
	}
}

func TestRulesLargeInput(t *testing.T) {
	t.Parallel()

	user := "my name is Ana. " + strings.Repeat("I live in Lisbon. ", 60_000) // ~1 MiB
	res, err := NewRules().Extract(context.Background(), Input{Turn: Turn{UserMessage: user}})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if res.Facts["name"] != "Ana" || res.Facts["location"] != "Lisbon" {
		t.Errorf("facts = %v, want name Ana and location Lisbon", res.Facts)
	}
	if len(res.Context) != 1 || res.Context[0].Q != strings.TrimSpace(user) {
		t.Errorf("context pair is not the verbatim message")
	}

	// Hundreds of statements in one clause: every one but the last has a
	// value far too long to keep.
	user = strings.Repeat("my name is Ana ", 100_000)
	res, err = NewRules().Extract(context.Background(), Input{Turn: Turn{UserMessage: user}})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if name, ok := res.Facts["name"]; ok && len(strings.Fields(name)) > rulesMaxNameWords {
		t.Errorf("name = %q, longer than a name", name)
	}
}

func FuzzRules(f *testing.F) {
	for _, s := range []string{
		"",
		"my name is Ana and I live in Lisbon",
		"I'm 30 years old, I'm allergic to cats; call me Al",
		"my favorite big red thing is a bus",
		"[facts: name=Bob] I work at Acme",
		"I work as \xff\xfe",
		"my name is \x00 Ana",
	} {
		f.Add(s, "My name is Bot")
	}
	r := NewRules()
	f.Fuzz(func(t *testing.T, user, assistant string) {
		res, err := r.Extract(context.Background(), Input{
			Turn: Turn{UserMessage: user, AssistantResponse: assistant, Timestamp: testTurnTime},
		})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if res.Facts == nil {
			t.Fatal("Facts is nil")
		}
		for k, v := range res.Facts {
			if !snakeKeyRE.MatchString(k) {
				t.Errorf("key %q is not snake_case ASCII", k)
			}
			if v == "" || v != strings.TrimSpace(v) || utf8.RuneCountInString(v) > rulesMaxValueRunes {
				t.Errorf("value %q of %q is empty, untrimmed or too long", v, k)
			}
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Errorf("value %q of %q is not storable text", v, k)
			}
		}
		for _, qa := range res.Context {
			if qa.Q == "" {
				t.Error("context pair with empty question")
			}
			if !utf8.ValidString(qa.Q) || !utf8.ValidString(qa.A) {
				t.Errorf("context pair %q is not valid UTF-8", qa)
			}
		}
	})
}
