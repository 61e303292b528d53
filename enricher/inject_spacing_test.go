package enricher

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// spacedCode is Python whose alignment and blank lines are the
// document's: a dict aligned by spaces, a comment aligned by a tab (to
// column 16: spaces to the next multiple of four), two blank lines
// between definitions (PEP 8), with prose around the fence whose runs of
// spaces and blank lines still go.
const spacedCode = "Some   prose.\n\n```python\nTIMEOUT  = 30    # seconds\nRETRIES  = 3\t# times\n\n\ndef f():\n    return {'a':   1,\n            'bb':  2}\n```\n\nMore   prose."

// TestRenderDocsCodeKeepsItsSpacing: in every format a chunk's fenced
// code keeps its runs of spaces inside its lines (a tab as spaces to the
// next multiple of four columns) and its blank lines (each indented
// under the entry as its other lines), where the
// prose around it still has them collapsed and dropped. Before, the code
// read "TIMEOUT = 30 # seconds" and lost the blank lines between its
// definitions: Python's and YAML's alignment, a Go struct's columns.
func TestRenderDocsCodeKeepsItsSpacing(t *testing.T) {
	t.Parallel()
	chunk := events.DocumentChunk{Source: "app.md", ChunkIndex: 0, Score: 0.5, Text: spacedCode}
	code := func(indent string) string {
		return "```python\n" + indent + "TIMEOUT  = 30    # seconds\n" + indent + "RETRIES  = 3    # times\n" + indent + "\n" + indent + "\n" +
			indent + "def f():\n" + indent + "    return {'a':   1,\n" + indent + "            'bb':  2}\n" + indent + "```\n"
	}
	tests := []struct{ format, want string }{
		{events.FormatSystem, "1. Some prose.\n   " + code("   ") + "   More prose.\n   (source: [1] app.md, chunk 0)"},
		{events.FormatMarkdown, "1. Some prose.\n   " + code("   ") + "   More prose.\n   [1] _Relevance 0.50_"},
		{events.FormatInline, "[1] app.md, chunk 0: Some prose.\n  " + code("  ") + "  More prose.\n]"},
	}
	readers := map[string]func(string) (readBack, error){
		events.FormatInline: readInlineAll, events.FormatSystem: readSystemAll, events.FormatMarkdown: readMarkdownAll,
	}
	cc := cleanChunks([]events.DocumentChunk{chunk})
	for _, tt := range tests {
		got := renderDocs(tt.format, nil, nil, cc)
		if !strings.Contains(got, tt.want) {
			t.Errorf("%s:\n got %q\nwant it to hold %q", tt.format, got, tt.want)
		}
		// A reader of the documented shape reads the chunk's text back,
		// its code's blank lines and spacing with it.
		rb, err := readers[tt.format](got)
		if err != nil || len(rb.chunks) != 1 || parenthesized(rb.chunks[0].text) != cc[0].text {
			t.Errorf("%s: read back as %+v (%v), want the chunk %q", tt.format, rb.chunks, err, cc[0].text)
		}
	}
}

// TestProseLineOfAFencedChunkIsNeutralized: a prose line of a chunk with
// fences, cleaned as fenced code keeps it and then its runs of spaces
// collapsed, is the line neutralize writes, whatever it holds (the
// poison pieces: every kind of white space, control characters, control
// tokens, brackets).
func TestProseLineOfAFencedChunkIsNeutralized(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		line := strings.NewReplacer("\n", "", "\r", "").Replace(poisonString(r) + poisonString(r))
		for _, brackets := range []bool{false, true} {
			for _, col := range []int{0, 3} {
				if got, want := collapseSpaces(neutralizeCode(line, brackets, col)), neutralizeKeeping(line, brackets); got != want {
					t.Fatalf("%q (brackets %v): %q, want %q", line, brackets, got, want)
				}
			}
		}
	}
}
