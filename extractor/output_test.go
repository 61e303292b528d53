package extractor

import (
	"errors"
	"fmt"
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
		// A model echoing the correction note: its example is not memory
		// (an operator's walk saw key=value and a "..." pair stored).
		{name: "the note echoed", reply: invalidNote(errors.New("bad")), wantErr: "repeats the example"},
		{name: "the note echoed, compacted", reply: `{"facts":[{"op":"set","key":"key","value":"value"}],"context":[{"q":"...","a":"..."}]}`, wantErr: "repeats the example"},
		{name: "the note echoed before a real reply", reply: invalidNote(errors.New("bad")) + "\n" + `{"facts": {"name": "Ana"}}`,
			wantFacts: map[string]string{"name": "Ana"}},
		{name: "missing facts", reply: `{"context": []}`, wantFacts: map[string]string{}},
		{name: "null members", reply: `{"facts": null, "context": null}`, wantFacts: map[string]string{}},
		{name: "scalars coerced", reply: `{"facts": {"age": 34, "height_m": 1.72, "vegan": true, "smoker": false}}`,
			wantFacts: map[string]string{"age": "34", "height_m": "1.72", "vegan": "true", "smoker": "false"}},
		{name: "list joined", reply: `{"facts": {"languages": ["English", "Portuguese", null, ""]}}`,
			wantFacts: map[string]string{"languages": "English, Portuguese"}},
		{name: "unknown values dropped", reply: `{"facts": {"name": "unknown", "city": "N/A", "job": null, "email": "Not provided",
			"pet": "none", "car": "  ", "board_game": "chess", "empty_list": []}}`, wantFacts: map[string]string{"board_game": "chess"}},
		{name: "keys normalised", reply: `{"facts": {"Favorite Color": "blue", "homePlanet": "Earth", "  x-ray ": "done", "日本": "x"}}`,
			wantFacts: map[string]string{"favorite_color": "blue", "home_planet": "Earth", "x_ray": "done"}},
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
		{name: "truncated json", reply: `{"facts": {"name": "An`, wantErr: "reply is not valid JSON: unexpected EOF"},
		{name: "neither key", reply: `{"name": "Ana"}`, wantErr: "neither"},
		{name: "facts item a string", reply: `{"facts": ["name: Ana"], "context": []}`, wantErr: `"facts" item 0 is a string`},
		{name: "facts item without key", reply: `{"facts": [{"op": "set", "value": "Ana"}]}`, wantErr: `has no "key"`},
		{name: "facts item key an object", reply: `{"facts": [{"op": "set", "key": {}, "value": "Ana"}]}`, wantErr: `"key" that is an object`},
		{name: "facts item value an object", reply: `{"facts": [{"op": "set", "key": "name", "value": {"first": {"given": "Ana"}}}]}`, wantErr: "value is an object holding an object"},
		{name: "facts as string", reply: `{"facts": "Ana", "context": []}`, wantErr: `"facts" is a string`},
		{name: "nested fact object", reply: `{"facts": {"name": {"first": "Ana"}}}`, wantErr: "value is an object"},
		{name: "list of objects", reply: `{"facts": {"kids": [{"name": "Bo"}]}}`, wantErr: "list holds an object"},
		{name: "context as object", reply: `{"facts": {}, "context": {"q": "a"}}`, wantErr: `"context" is an object`},
		{name: "context item string", reply: `{"context": ["remember this"]}`, wantErr: "item 0 is a string"},
		{name: "context q object", reply: `{"context": [{"q": {"x": 1}, "a": "b"}]}`, wantErr: "not a string"},
		{name: "top-level list", reply: `[{"facts": {}}]`, wantFacts: map[string]string{}}, // the object inside is found
		{name: "v1 alias key is canonical", reply: `{"facts": {"city": "Porto"}}`, wantFacts: map[string]string{"location": "Porto"}},
		{name: "v2 set", reply: `{"facts": [{"op": "set", "key": "Location", "value": "Porto"}], "context": []}`,
			wantFacts: map[string]string{"location": "Porto"}},
		{name: "v2 empty list", reply: `{"facts": [], "context": []}`, wantFacts: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := parseOutput(tt.reply)
			facts, qas := res.Facts, res.Context
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

	res, err := parseOutput(b.String())
	facts, qas := res.Facts, res.Context
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

func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{
		`{"facts": {"name": "Ana"}, "context": [{"q": "a", "a": "b"}]}`,
		"```json\n{\"facts\": {}}\n```",
		`{"facts": [1], "context": {}}`,
		`{"facts": {"x": [1, true, null, "s"]}}`,
		"<think>{</think>{\"context\": []}",
		`{"facts": [{"op": "add", "key": "allergies", "value": "peanuts, soy"}, {"op": "delete", "key": "car"}, {"op": "unset", "key": "x", "value": 1}]}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reply string) {
		res, err := parseOutput(reply)
		if err != nil {
			return
		}
		facts, qas := res.Facts, res.Context
		for _, c := range res.Changes {
			if !snakeKeyRE.MatchString(c.Key) || len(c.Key) > maxKeyBytes || (c.Op != OpAdd && c.Op != OpRemove && c.Op != OpDelete) {
				t.Errorf("bad change %+v", c)
			}
			if _, both := facts[c.Key]; both && c.Op == OpDelete {
				t.Errorf("key %q both set and deleted", c.Key)
			}
			if c.Op != OpDelete && (c.Value == "" || !utf8.ValidString(c.Value) || strings.ContainsRune(c.Value, 0)) {
				t.Errorf("bad value in change %+v", c)
			}
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

// TestParseOutputOperations: reply format v2, its synonyms and bad items,
// resolved into the values a turn sets and its other changes.
func TestParseOutputOperations(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name        string
		facts       string // the reply's "facts" member
		wantFacts   map[string]string
		wantChanges []FactChange
	}{
		{"set", `[{"op": "set", "key": "location", "value": "Porto"}]`, map[string]string{"location": "Porto"}, nil},
		{"op missing is a set (batch v1 items)", `[{"key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
		{"op null is a set", `[{"op": null, "key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
		{"update is set", `[{"op": "Update", "key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
		{"replace is set", `[{"op": " replace ", "key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
		{"add on a list", `[{"op": "add", "key": "allergies", "value": "shellfish"}]`, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "shellfish"}}},
		{"append is add, alias canonical", `[{"op": "append", "key": "allergy", "value": "soy"}]`, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "soy"}}},
		{"add list value is its items", `[{"op": "add", "key": "allergies", "value": ["soy", "eggs", null]}]`, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "soy"}, {OpAdd, "allergies", "eggs"}}},
		{"remove on a list", `[{"op": "remove", "key": "allergies", "value": "peanuts"}]`, map[string]string{},
			[]FactChange{{OpRemove, "allergies", "peanuts"}}},
		{"add and remove on one list", `[{"op": "add", "key": "allergies", "value": "shellfish"}, {"op": "remove", "key": "allergies", "value": "peanuts"}]`,
			map[string]string{}, []FactChange{{OpAdd, "allergies", "shellfish"}, {OpRemove, "allergies", "peanuts"}}},
		{"last op on an item wins", `[{"op": "add", "key": "allergies", "value": "Soy"}, {"op": "remove", "key": "allergies", "value": "soy"}]`,
			map[string]string{}, []FactChange{{OpRemove, "allergies", "soy"}}},
		{"list sets accumulate, deduplicated", `[{"op": "set", "key": "allergies", "value": "peanuts"}, {"op": "set", "key": "allergies", "value": "Soy, PEANUTS"}]`,
			map[string]string{"allergies": "PEANUTS, Soy"}, nil},
		{"delete needs no value", `[{"op": "delete", "key": "car"}]`, map[string]string{}, []FactChange{{OpDelete, "car", ""}}},
		{"delete keeps its value for history", `[{"op": "delete", "key": "diet", "value": "vegetarian"}]`, map[string]string{},
			[]FactChange{{OpDelete, "diet", "vegetarian"}}},
		{"unset is delete", `[{"op": "unset", "key": "car", "value": "Golf"}]`, map[string]string{}, []FactChange{{OpDelete, "car", "Golf"}}},
		{"clear is delete", `[{"op": "clear", "key": "car"}]`, map[string]string{}, []FactChange{{OpDelete, "car", ""}}},
		{"add on a single key is a set", `[{"op": "add", "key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
		{"remove on a single key is a delete", `[{"op": "remove", "key": "car", "value": "Golf"}]`, map[string]string{},
			[]FactChange{{OpDelete, "car", "Golf"}}},
		{"last of set and delete wins", `[{"op": "set", "key": "car", "value": "Golf"}, {"op": "delete", "key": "car", "value": "Golf"}]`,
			map[string]string{}, []FactChange{{OpDelete, "car", "Golf"}}},
		{"delete then set is a set", `[{"op": "delete", "key": "location", "value": "Berlin"}, {"op": "set", "key": "location", "value": "Porto"}]`,
			map[string]string{"location": "Porto"}, nil},
		{"unknown op dropped, not the reply", `[{"op": "merge", "key": "name", "value": "Ana"}, {"op": "set", "key": "boat", "value": "Ketch"}]`,
			map[string]string{"boat": "Ketch"}, nil},
		{"unchanged dropped", `[{"op": "unchanged", "key": "location", "value": "Porto"}]`, map[string]string{}, nil},
		{"op not a string dropped", `[{"op": 1, "key": "name", "value": "Ana"}, {"op": ["set"], "key": "pet", "value": "cat"}]`, map[string]string{}, nil},
		{"unknown values dropped", `[{"op": "set", "key": "name", "value": "unknown"}, {"op": "add", "key": "allergies", "value": "none"}, {"op": "set", "key": "job"}]`,
			map[string]string{}, nil},
		{"empty key dropped", `[{"op": "set", "key": "", "value": "x"}, {"op": "delete", "key": "!!"}]`, map[string]string{}, nil},
		{"scalars coerced", `[{"op": "set", "key": "age", "value": 34}]`, map[string]string{"age": "34"}, nil},
		{"object of flat values written out", `[{"op": "set", "key": "address", "value": {"street": "Rua Augusta 5", "city": "Lisbon", "zip": null, "floor": 3, "unit": "unknown"}}]`,
			map[string]string{"address": "street: Rua Augusta 5; city: Lisbon; floor: 3"}, nil},
		{"object with a list", `[{"op": "set", "key": "family", "value": {"wife": "Ana", "kids": ["Rui", "Eva"]}}]`,
			map[string]string{"family": "wife: Ana; kids: Rui, Eva"}, nil},
		{"markers stripped from values", `[{"op": "add", "key": "allergies", "value": "[facts: x] soy"}]`, map[string]string{},
			[]FactChange{{OpAdd, "allergies", "soy"}}},
		{"turn ignored in a single-turn reply", `[{"turn": 3, "op": "set", "key": "name", "value": "Ana"}]`, map[string]string{"name": "Ana"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := parseOutput(`{"facts": ` + tt.facts + `, "context": []}`)
			if err != nil {
				t.Fatalf("parseOutput: %v", err)
			}
			if !maps.Equal(res.Facts, tt.wantFacts) || !slices.Equal(res.Changes, tt.wantChanges) {
				t.Errorf("facts, changes = %v, %v; want %v, %v", res.Facts, res.Changes, tt.wantFacts, tt.wantChanges)
			}
		})
	}
}

// TestParseOutputBoundsListItems: a reply cannot add more than maxFacts
// list items, however it spreads them.
func TestParseOutputBoundsListItems(t *testing.T) {
	t.Parallel()

	var items []string
	for i := range maxFacts * 3 {
		items = append(items, fmt.Sprintf(`{"op": "add", "key": "allergies", "value": "item %d, other %d"}`, i, i))
	}
	res, err := parseOutput(`{"facts": [` + strings.Join(items, ",") + `]}`)
	if err != nil {
		t.Fatalf("parseOutput: %v", err)
	}
	if len(res.Changes) != maxFacts {
		t.Errorf("got %d changes, want the cap %d", len(res.Changes), maxFacts)
	}
}
