package enricher

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/events"
)

// fenceLeftOpen is the fence lines leave open, read as docs/protocol.md
// says a reader of a chunk's lines reads fences ("Documents in enrich"):
// a run of three or more backticks or tildes after a line's
// indentation, closed by a line of a run as long of the same indented
// at most three more.
func fenceLeftOpen(lines []string) string {
	fence, open := "", 0
	for _, l := range lines {
		t := strings.TrimLeft(l, " ")
		in := len(l) - len(t)
		switch {
		case fence != "":
			if in <= open+3 && strings.HasPrefix(t, fence) && strings.TrimRight(strings.Trim(t, fence[:1]), " ") == "" {
				fence = ""
			}
		case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
			fence, open = t[:len(t)-len(strings.TrimLeft(t, t[:1]))], in
		}
	}
	return fence
}

// TestInjectedChunkLeavesNoFenceOpen: a chunk whose lines open a fence
// they do not close (a document ending inside a code block, a fence
// under a list item ended by a line left of the item's text, a literal
// fence line in indented code, a paragraph opening with "```" and an
// inline span) is injected with no fence left open, so that its own
// source or mark line and the entries after it are not read as its
// code. Before, escapeChunk read such a line as a fence at any
// indentation (since f507583f) and left it open: in markdown the entry's
// "[1] _Relevance" line, the next entries and the Citations were inside
// it, and the chunk's prose after the line was written unescaped.
func TestInjectedChunkLeavesNoFenceOpen(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"Intro.\n\n```sh\nmake\nmake test\n",
		"1. Tag:\n\n    ```shell\n    git tag x\n    git push\n\nNext: more *text*, a_b.\n",
		"Example of a fence:\n\n    ```\n    code here\n\nAfter: the *end*.\n",
		"Example:\n\n\t~~~\n\tcode here\n\nAfter: the *end*.\n",
		"```go fmt``` formats: run it.\n",
	} {
		cs, err := chunker.Split(src, chunker.Config{})
		if err != nil || len(cs) != 1 {
			t.Fatalf("%q: %d chunks, %v", src, len(cs), err)
		}
		chunks := []events.DocumentChunk{{Source: "a.md", Text: cs[0].Text, Score: 0.5}, {Source: "b.md", Text: "Next entry: *b*.", Score: 0.4}}
		for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
			inj := renderDocs(format, nil, nil, cleanChunks(chunks))
			lines := strings.Split(inj, "\n")
			// The entry: its lines from "1. " to its source or mark,
			// which is on its last line (of its own, or after the text of
			// a chunk of one line).
			mark := regexp.MustCompile(`\(source: \[1\] | \[1\]$|^ *\[1\] _Relevance`)
			first := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "1. ") })
			end := first + slices.IndexFunc(lines[first:], mark.MatchString)
			entry := slices.Clone(lines[first : end+1])
			entry[0] = strings.TrimPrefix(entry[0], "1. ")
			entry[len(entry)-1] = entry[len(entry)-1][:mark.FindStringIndex(entry[len(entry)-1])[0]]
			if f := fenceLeftOpen(entry); f != "" {
				t.Errorf("%s: %q is injected leaving the fence %q open before its source:\n%s", format, cs[0].Text, f, inj)
			}
			if f := fenceLeftOpen(append(entry, lines[end+1:]...)); f != "" {
				t.Errorf("%s: %q leaves the fence %q open to the injection's end", format, cs[0].Text, f)
			}
		}
	}
}

// TestFencesClosedIsReadingOn: fencesClosed says of a fence line what
// reading on from it to a closing line says, on random lines of runs,
// info strings and indentation.
func TestFencesClosedIsReadingOn(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"```", "````", "~~~", "~~~~~", "`", "~", " ", "  ", "    ", "go", "x", " ```"}
	for range 2000 {
		lines := make([]string, 1+r.IntN(8))
		for i := range lines {
			for range r.IntN(4) {
				lines[i] += pieces[r.IntN(len(pieces))]
			}
		}
		got := fencesClosed(lines)
		for i, l := range lines {
			trimmed := strings.TrimLeft(l, " ")
			want := false
			if run := fenceRun(trimmed); run > 0 {
				for _, m := range lines[i+1:] {
					mt := strings.TrimLeft(m, " ")
					if closesFence(mt, len(m)-len(mt), trimmed[:run], len(l)-len(trimmed)) {
						want = true
						break
					}
				}
			}
			if got[i] != want {
				t.Fatalf("%q: line %d closed %v, reading on says %v", lines, i, got[i], want)
			}
		}
	}
}
