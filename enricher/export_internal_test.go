package enricher

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestEscapedLenBoundsTheReply: escapedLen is never under what the reply's
// encoder writes for a line, and exact for ASCII, so that a page cut by it
// stays under the payload limit without wasting it.
func TestEscapedLenBoundsTheReply(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line  string
		exact bool
	}{
		{`{"type":"fact","key":"city"}` + "\n", true},
		{"quotes \" and \\ backslashes\t\r\n", true},
		{"control \x01\x1f and <html> & co", true},
		{"ünïcödé, 日本語, emoji 🙂", false},
		{"line\u2028separator\u2029", false},
		{"", true},
	} {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(c.line); err != nil {
			t.Fatal(err)
		}
		want := buf.Len() - 3 // the quotes and Encode's newline
		got := escapedLen([]byte(c.line))
		if got < want || (c.exact && got != want) {
			t.Errorf("escapedLen(%q) = %d, encoded %d (exact: %v)", c.line, got, want, c.exact)
		}
	}
}
