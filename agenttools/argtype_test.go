package agenttools_test

import (
	"strings"
	"testing"
)

// TestArgumentOfAnotherTypeIsNamed: an argument of another JSON type than
// its schema's (an id a model quotes, "17") is refused naming the argument,
// the type wanted and the type sent, in words a model can act on. Before,
// the SDK's validation error was a schema path ("validating
// /properties/id: type: 17 has type \"string\", want one of \"integer\"")
// that named neither the tool's argument plainly nor the fix (a walk).
func TestArgumentOfAnotherTypeIsNamed(t *testing.T) {
	t.Parallel()
	s := mustConnect(t, startHTTP(t), "alice-key")
	for _, tc := range []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"delete_memory", map[string]any{"id": "17"}, []string{`argument "id" must be an integer`, "a string"}},
		{"search_memory", map[string]any{"query": "keys", "limit": "5"}, []string{`argument "limit" must be an integer`, "a string"}},
		{"search_memory", map[string]any{"query": 42}, []string{`argument "query" must be a string`, "a number"}},
		// Every wrong argument at once, so that one retry can fix them
		// all (before: one of them, whichever the map gave first).
		{"list_memories", map[string]any{"limit": "2", "cursor": 7}, []string{`argument "cursor" must be a string, not a number (7)`, `argument "limit" must be an integer, not a string ("2")`}},
		// A long value is shown cut at a character's end: "\xc3" was half
		// of an "é".
		{"search_memory", map[string]any{"query": "q", "limit": "a" + strings.Repeat("é", 30)}, []string{`("a` + strings.Repeat("é", 19) + `...")`}},
	} {
		got := toolError(t, s, tc.tool, tc.args)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %v: %q, want it to say %q", tc.tool, tc.args, got, w)
			}
		}
	}
}
