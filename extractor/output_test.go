package extractor

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseOutput(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		reply     string
		wantFacts map[string]string
		wantQA    []QA
		wantErr   string // substring of the error; "" means success
	}{
		{name: "plain", reply: `{"facts": {"name": "Ana"}, "context": [{"q": "Q1", "a": "A1"}]}`,
			wantFacts: map[string]string{"name": "Ana"}, wantQA: []QA{{Q: "Q1", A: "A1"}}},
		{name: "empty", reply: `{"facts": {}, "context": []}`, wantFacts: map[string]string{}},
		{name: "code fence", reply: "```json\n{\"facts\": {\"name\": \"Ana\"}, \"context\": []}\n```",
			wantFacts: map[string]string{"name": "Ana"}},
		{name: "bare code fence", reply: "```\n{\"facts\": {\"a\": \"b\"}}\n```", wantFacts: map[string]string{"a": "b"}},
		{name: "prose around", reply: "Sure! Here is the JSON:\n{\"facts\": {\"name\": \"Ana\"}}\nHope this {helps}.",
			wantFacts: map[string]string{"name": "Ana"}},
		{name: "stray brace before", reply: "Note {x} first: {\"context\": [{\"q\": \"q\", \"a\": \"a\"}]}",
			wantFacts: map[string]string{}, wantQA: []QA{{Q: "q", A: "a"}}},
		{name: "think block", reply: "<think>maybe {\"facts\": []}</think>{\"facts\": {\"x\": \"y\"}}",
			wantFacts: map[string]string{"x": "y"}},
		{name: "missing context", reply: `{"facts": {"a": "b"}}`, wantFacts: map[string]string{"a": "b"}},
		{name: "missing facts", reply: `{"context": []}`, wantFacts: map[string]string{}},
		{name: "null members", reply: `{"facts": null, "context": null}`, wantFacts: map[string]string{}},
		{name: "scalars coerced", reply: `{"facts": {"age": 34, "height_m": 1.72, "vegan": true, "smoker": false}}`,
			wantFacts: map[string]string{"age": "34", "height_m": "1.72", "vegan": "true", "smoker": "false"}},
		{name: "list joined", reply: `{"facts": {"languages": ["English", "Portuguese", null, ""]}}`,
			wantFacts: map[string]string{"languages": "English, Portuguese"}},
		{name: "unknown values dropped", reply: `{"facts": {"name": "unknown", "city": "N/A", "job": null, "email": "Not provided",
			"pet": "none", "car": "  ", "hobby": "chess", "empty_list": []}}`, wantFacts: map[string]string{"hobby": "chess"}},
		{name: "keys normalised", reply: `{"facts": {"Favorite Color": "blue", "homeTown": "Porto", "  e-mail ": "a@b.c", "日本": "x"}}`,
			wantFacts: map[string]string{"favorite_color": "blue", "home_town": "Porto", "e_mail": "a@b.c"}},
		{name: "later duplicate wins", reply: `{"facts": {"Location": "Oslo", "location": "Bergen"}}`,
			wantFacts: map[string]string{"location": "Bergen"}},
		{name: "empty q dropped", reply: `{"context": [{"q": "", "a": "x"}, {"q": " hi ", "a": " there "}, {"a": "no q"}]}`,
			wantFacts: map[string]string{}, wantQA: []QA{{Q: "hi", A: "there"}}},
		{name: "question alias", reply: `{"context": [{"question": "Q", "answer": "A"}]}`,
			wantFacts: map[string]string{}, wantQA: []QA{{Q: "Q", A: "A"}}},
		{name: "markers in values stripped", reply: `{"facts": {"a": "[facts: x] b"}, "context": [{"q": "[context: y]", "a": "z"}]}`,
			wantFacts: map[string]string{"a": "b"}},

		{name: "not json", reply: "I cannot help with that.", wantErr: "no JSON object"},
		{name: "empty reply", reply: "  ", wantErr: "empty"},
		{name: "truncated json", reply: `{"facts": {"name": "An`, wantErr: "no JSON object"},
		{name: "neither key", reply: `{"name": "Ana"}`, wantErr: "neither"},
		{name: "facts as list", reply: `{"facts": ["name: Ana"], "context": []}`, wantErr: `"facts" is a list`},
		{name: "facts as string", reply: `{"facts": "Ana", "context": []}`, wantErr: `"facts" is a string`},
		{name: "nested fact object", reply: `{"facts": {"name": {"first": "Ana"}}}`, wantErr: "value is an object"},
		{name: "list of objects", reply: `{"facts": {"kids": [{"name": "Bo"}]}}`, wantErr: "list holds an object"},
		{name: "context as object", reply: `{"facts": {}, "context": {"q": "a"}}`, wantErr: `"context" is an object`},
		{name: "context item string", reply: `{"context": ["remember this"]}`, wantErr: "item 0 is a string"},
		{name: "context q object", reply: `{"context": [{"q": {"x": 1}, "a": "b"}]}`, wantErr: "not a string"},
		{name: "top-level list", reply: `[{"facts": {}}]`, wantFacts: map[string]string{}}, // the object inside is found
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			facts, qas, err := parseOutput(tt.reply)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseOutput(%q) error = %v, want one containing %q", tt.reply, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseOutput(%q): %v", tt.reply, err)
			}
			if !maps.Equal(facts, tt.wantFacts) {
				t.Errorf("facts = %v, want %v", facts, tt.wantFacts)
			}
			if !slices.Equal(qas, tt.wantQA) {
				t.Errorf("context = %q, want %q", qas, tt.wantQA)
			}
		})
	}
}

func TestParseOutputBounds(t *testing.T) {
	t.Parallel()

	var b strings.Builder
	b.WriteString(`{"facts": {`)
	for i := range maxFacts + 10 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + strings.Repeat("y", i) + `": "v"`)
	}
	b.WriteString(`}, "context": [`)
	for i := range maxContextPairs + 5 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"q": "q", "a": "` + strings.Repeat("é", maxAnswerRunes+10) + `"}`)
	}
	b.WriteString(`]}`)

	facts, qas, err := parseOutput(b.String())
	if err != nil {
		t.Fatalf("parseOutput: %v", err)
	}
	if len(facts) != maxFacts {
		t.Errorf("got %d facts, want the cap %d", len(facts), maxFacts)
	}
	for k := range facts {
		if len(k) > maxKeyBytes || !snakeKeyRE.MatchString(k) {
			t.Errorf("key %q is too long or not snake_case", k)
		}
	}
	if len(qas) != maxContextPairs {
		t.Errorf("got %d context pairs, want the cap %d", len(qas), maxContextPairs)
	}
	if n := utf8.RuneCountInString(qas[0].A); n != maxAnswerRunes {
		t.Errorf("answer has %d runes, want the cap %d", n, maxAnswerRunes)
	}
}

func TestSnakeKey(t *testing.T) {
	t.Parallel()

	tests := []struct{ in, want string }{
		{"name", "name"},
		{"Favorite Color", "favorite_color"},
		{"favoriteColor", "favorite_color"},
		{"HTTPServer", "httpserver"},
		{"  --wife's  name-- ", "wife_s_name"},
		{"dog2Name", "dog2_name"},
		{"café", "caf"},
		{"日本", ""},
		{"___", ""},
		{strings.Repeat("ab_", 40), strings.TrimSuffix(strings.Repeat("ab_", 40)[:maxKeyBytes], "_")},
	}
	for _, tt := range tests {
		if got := snakeKey(tt.in); got != tt.want {
			t.Errorf("snakeKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{
		`{"facts": {"name": "Ana"}, "context": [{"q": "a", "a": "b"}]}`,
		"```json\n{\"facts\": {}}\n```",
		`{"facts": [1], "context": {}}`,
		`{"facts": {"x": [1, true, null, "s"]}}`,
		"<think>{</think>{\"context\": []}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		facts, qas, err := parseOutput(reply)
		if err != nil {
			return
		}
		for k, v := range facts {
			if !snakeKeyRE.MatchString(k) || len(k) > maxKeyBytes {
				t.Errorf("bad key %q", k)
			}
			if v == "" || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Errorf("bad value %q for %q", v, k)
			}
		}
		for _, qa := range qas {
			if qa.Q == "" || !utf8.ValidString(qa.Q) || !utf8.ValidString(qa.A) {
				t.Errorf("bad context pair %q", qa)
			}
		}
	})
}
