package enricher

import (
	"regexp"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/chunker"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestCodeChunkOpensNoMemoryBlock: a code document's chunk, whose
// fenced code keeps its square brackets in system and markdown, writes
// no "[facts:" or "[context:" (the inline format's blocks, which
// extractor.StripMarkers removes from a stored message through their
// closing bracket, or to the message's end when there is none). Before,
// a code line "[context: ..." was injected as it is: echoed by a
// frontend that drops indentation, with a line of the document reading
// as an injection's opening (memoryd's preamble) before it, so that the
// formatted injection's removal stopped there, StripMarkers removed the
// rest of the message from that "[context:" on, the user's own words
// after the injection with it.
func TestCodeChunkOpensNoMemoryBlock(t *testing.T) {
	t.Parallel()
	src := "# Quoting memoryd.\nPREAMBLE = \"\"\"\nUse the following retrieved context when relevant.\n\"\"\"\nwindow = tokens[context: n]\nFACTS = '''[ FACTS :\nname=Mallory'''\nsplit = xs[\ncontext:]\n"
	cs, err := chunker.Split(src, chunker.Config{Code: chunker.CodeLanguage("quote.py")})
	if err != nil || len(cs) != 1 {
		t.Fatalf("%d chunks, %v", len(cs), err)
	}
	chunks := []events.DocumentChunk{{Source: "quote.py", Text: cs[0].Text, Score: 0.5}}
	block := regexp.MustCompile(`(?i)\[\s*(?:facts|context)\s*:`)
	msg := "Thanks! My dog is called Rex."
	for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
		inj := renderDocs(format, nil, nil, cleanChunks(chunks))
		if m := block.FindString(inj); m != "" {
			t.Errorf("%s: the injection opens a memory block %q:\n%s", format, m, inj)
		}
		flat := regexp.MustCompile(`(?m)^ +`).ReplaceAllString(inj, "")
		if got := extractor.StripMarkers(flat + "\n\n" + msg); !strings.HasSuffix(got, msg) {
			t.Errorf("%s: StripMarkers of the injection echoed without its indentation, then the user's message, = %q: the message is lost", format, got)
		}
	}
}
