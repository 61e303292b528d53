package enricher

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
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
		if err := encodeReply(&buf, c.line); err != nil {
			t.Fatal(err)
		}
		want := buf.Len() - 2 // the quotes
		got := escapedLen([]byte(c.line))
		if got < want || (c.exact && got != want) {
			t.Errorf("escapedLen(%q) = %d, encoded %d (exact: %v)", c.line, got, want, c.exact)
		}
	}
}

// TestFitEscapedCutsOnARune: a split export line ends on a rune boundary,
// within the limit, and always advances.
func TestFitEscapedCutsOnARune(t *testing.T) {
	t.Parallel()
	line := []byte(strings.Repeat("\x01é日", 100))
	for _, limit := range []int{1, 7, 8, 100, 1000} {
		n := fitEscaped(line, limit)
		if n == 0 || !utf8.Valid(line[:n]) || n > 1 && escapedLen(line[:n]) > limit {
			t.Errorf("fitEscaped(limit %d) = %d: escaped %d, valid %v", limit, n, escapedLen(line[:n]), utf8.Valid(line[:n]))
		}
	}
}
