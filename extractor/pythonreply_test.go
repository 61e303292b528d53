package extractor

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/extractor/extractortest"
)

// TestPythonLiteralReply: small local models (Ollama's qwen, llama, phi)
// sometimes answer with a Python dict's repr instead of JSON: strings in
// single quotes, True, False and None, trailing commas. Such a reply is
// read as the JSON it stands for, but only where it is not valid JSON:
// JSON means what it says. Before, each was "reply is not valid JSON",
// and a model that repeated it in its correction failed the turn (a walk:
// 12 of 12 turns failed for good).
func TestPythonLiteralReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, reply string
		want        map[string]string
		context     int // context pairs
	}{
		{"single quotes", `{'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis'}], 'context': []}`,
			map[string]string{"sport": "tennis"}, 0},
		{"True False None", `{'facts': [{'op': 'set', 'key': 'vegetarian', 'value': True}, {'op': 'set', 'key': 'smoker', 'value': False}, {'op': 'set', 'key': 'sport', 'value': None}], 'context': None}`,
			map[string]string{"vegetarian": "true", "smoker": "false"}, 0},
		{"trailing commas", `{'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis',},], 'context': [],}`,
			map[string]string{"sport": "tennis"}, 0},
		{"apostrophe in a double-quoted string", `{'facts': [{'op': 'set', 'key': 'employer', 'value': "McDonald's"}], 'context': [{'q': "What is the user's sport?", 'a': 'tennis'}]}`,
			map[string]string{"employer": "McDonald's"}, 1},
		{"escaped apostrophe in a single-quoted string", `{'facts': [{'op': 'set', 'key': 'employer', 'value': 'McDonald\'s'}]}`,
			map[string]string{"employer": "McDonald's"}, 0},
		{"escaped apostrophe in a double-quoted string", `{"facts": [{"op": "set", "key": "employer", "value": "McDonald\'s"}]}`,
			map[string]string{"employer": "McDonald's"}, 0},
		{"double quote in a single-quoted string", `{'facts': [{'op': 'set', 'key': 'motto', 'value': 'say "yes"'}]}`,
			map[string]string{"motto": `say "yes"`}, 0},
		{"escaped double quote in a double-quoted string", `{'facts': [{'op': 'set', 'key': 'motto', 'value': "say \"yes\""}]}`,
			map[string]string{"motto": `say "yes"`}, 0},
		{"JSON escapes kept", `{'facts': [{'op': 'set', 'key': 'motto', 'value': 'a\\b \u00e9'}]}`,
			map[string]string{"motto": `a\b é`}, 0},
		{`\xHH escape`, `{'facts': [{'op': 'set', 'key': 'name', 'value': 'Jos\xe9 \x41na'}]}`,
			map[string]string{"name": "José Ana"}, 0},
		{`\xHH escape in a double-quoted string`, `{"facts": [{"op": "set", "key": "employer", "value": "Malm\xf6 AB"}], "context": [],}`,
			map[string]string{"employer": "Malmö AB"}, 0},
		{`\xHH escape beside others`, `{'facts': [{'op': 'set', 'key': 'motto', 'value': 'caf\xe9\n\u00e9\\x41'}]}`,
			map[string]string{"motto": "café\né\\x41"}, 0},
		{"numbers and a list", `{'facts': [{'op': 'set', 'key': 'age', 'value': 42}, {'op': 'set', 'key': 'languages', 'value': ['English', 'Portuguese']}]}`,
			map[string]string{"age": "42", "languages": "English, Portuguese"}, 0},
		{"v1 object of facts", `{'facts': {'sport': 'tennis'}}`, map[string]string{"sport": "tennis"}, 0},
		{"in a code fence, after reasoning", "<think>a dict will do</think>\n```python\n{'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis'}]}\n```",
			map[string]string{"sport": "tennis"}, 0},
		{"in prose", `Here is the result: {'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis'}]} Hope it helps!`,
			map[string]string{"sport": "tennis"}, 0},
		// Valid JSON is never read as Python: "True" is a string there,
		// and an apostrophe in a string is text.
		{"JSON string True stays a string", `{"facts": [{"op": "set", "key": "motto", "value": "True"}]}`,
			map[string]string{"motto": "True"}, 0},
		{"JSON with apostrophes", `{"facts": [{"op": "set", "key": "motto", "value": "it's 'quoted'"}]}`,
			map[string]string{"motto": "it's 'quoted'"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := parseOutput(tt.reply)
			if err != nil {
				t.Fatalf("parseOutput(%s): %v", tt.reply, err)
			}
			if !maps.Equal(res.Facts, tt.want) {
				t.Errorf("facts %v, want %v", res.Facts, tt.want)
			}
			if len(res.Context) != tt.context {
				t.Errorf("context %v, want %d pairs", res.Context, tt.context)
			}
		})
	}
}

// TestPythonLiteralAmbiguousRejected: what does not read one way only
// stays rejected with the JSON decoder's reason, as before: an apostrophe
// that ends a single-quoted string early, an escape JSON lacks, a bare
// word, a reply cut short.
func TestPythonLiteralAmbiguousRejected(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		`{'facts': [{'op': 'set', 'key': 'employer', 'value': 'McDonald's'}]}`,
		`{'facts': [{'op': 'set', 'key': 'genre', 'value': 'rock 'n' roll'}]}`,
		`{'facts': [{'op': 'set', 'key': 'initial', 'value': '\101'}]}`,
		`{'facts': [{'op': 'set', 'key': 'initial', 'value': '\x4'}]}`,
		`{'facts': [{'op': 'set', 'key': 'initial', 'value': '\xZZ'}]}`,
		// Python's \xHH is a code point, but a run of them that is UTF-8
		// is a bytes repr a model copied: "Ã©" or "é", it does not read
		// one way only.
		`{'facts': [{'op': 'set', 'key': 'name', 'value': 'Jos\xc3\xa9'}]}`,
		`{'facts': [{'op': 'set', 'key': 'sport', 'value': tennis}]}`,
		`{'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis'}]`,
		`{'facts': [{'op': 'set', 'key': 'sport', 'value': 'ten` + "\n" + `nis'}]}`,
		`{'facts': [{'op': 'set', 'key': 'sport' 'value': 'tennis'}]}`,
	} {
		_, err := parseOutput(reply)
		if err == nil || !strings.Contains(err.Error(), "reply is not valid JSON: ") {
			t.Errorf("parseOutput(%s) = %v, want it not valid JSON", reply, err)
		}
	}
}

// TestLLMReadsPythonLiteralReply: through the server, a Python literal
// reply is read at the first request, with no correction asked for.
func TestLLMReadsPythonLiteralReply(t *testing.T) {
	t.Parallel()
	srv := extractortest.NewServer(t, extractortest.Content(`{'facts': [{'op': 'set', 'key': 'sport', 'value': 'tennis'}, {'op': 'set', 'key': 'vegetarian', 'value': True},], 'context': [{'q': "What is the user's sport?", 'a': 'tennis'}]}`))
	res, err := newTestLLM(t, srv, nil).Extract(context.Background(), testInput("I play tennis and I'm vegetarian"))
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if want := map[string]string{"sport": "tennis", "vegetarian": "true"}; !maps.Equal(res.Facts, want) {
		t.Errorf("facts %v, want %v", res.Facts, want)
	}
	if len(res.Context) != 1 || res.Context[0].Q != "What is the user's sport?" {
		t.Errorf("context %v, want the one pair", res.Context)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("requests = %d, want 1 (no correction)", got)
	}
}

// TestPythonLiteralBeforeJSON: a reply holding a JSON object is read from
// it, whatever Python literal comes before (a format restated, a draft):
// the Python reading is for replies with no JSON object to read. Before,
// the first object that decoded either way won: "example" was stored for
// the user's name, not "Alice".
func TestPythonLiteralBeforeJSON(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		`The format is {'facts': {'name': 'example'}}, so: {"facts": {"name": "Alice"}}`,
		"Draft: {'facts': [{'op': 'set', 'key': 'name', 'value': 'example'}]}\n```json\n{\"facts\": [{\"op\": \"set\", \"key\": \"name\", \"value\": \"Alice\"}]}\n```",
	} {
		res, err := parseOutput(reply)
		if err != nil || res.Facts["name"] != "Alice" {
			t.Errorf("%s: facts %v, %v; want name Alice", reply, res.Facts, err)
		}
	}
}

// TestPythonHexEscapeNotInJSON: \xHH is read in the Python fallback only:
// the strict JSON pass rejects it (JSON has no such escape), and a reply
// holding a JSON object is read from it, not from a Python literal with
// \xHH before it.
func TestPythonHexEscapeNotInJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, s string }{
		{"double quotes", `{"facts": {"name": "Jos\xe9"}}`},
		{"single quotes", `{'facts': {'name': 'Jos\xe9'}}`},
	} {
		if _, _, _, err := decodeValue(tt.s, false); err == nil {
			t.Errorf("%s: strict pass read %s", tt.name, tt.s)
		}
		if raw, _, viaPython, err := decodeValue(tt.s, true); err != nil || !viaPython || !strings.Contains(string(raw), `Jos\u00e9`) {
			t.Errorf("%s: Python pass read %s as %s (via Python %v), %v; want Jos\u00e9", tt.name, tt.s, raw, viaPython, err)
		}
	}
	res, err := parseOutput(`Draft: {'facts': {'name': 'Jos\xe9'}} final: {"facts": {"name": "Jos\u00e9 Ana"}}`)
	if err != nil || res.Facts["name"] != "José Ana" {
		t.Errorf("facts %v, %v; want the JSON object's name", res.Facts, err)
	}
}
