package enricher

import (
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestEchoedInjectionWithAnOpeningInAChunkIsStripped: a document chunk of
// several lines one of which is an injection's opening (a page about
// memoryd quoting its preamble or heading) is indented under its entry,
// and the echoed injection is stripped whole.
func TestEchoedInjectionWithAnOpeningInAChunkIsStripped(t *testing.T) {
	t.Parallel()
	msg := "What's my dog's name?"
	for _, line := range []string{events.SystemPreamble, "Use the following retrieved context when relevant.", events.MarkdownHeading} {
		chunks := []events.DocumentChunk{{Source: "memoryd.md", Text: "The injection starts with:\n" + line + "\nand then the facts.", Score: 0.5}}
		for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
			inj := renderDocs(format, nil, nil, cleanChunks(chunks))
			for _, turn := range []string{inj + "\n\n" + msg, msg + "\n\n" + inj} {
				if got := extractor.StripMarkers(turn); got != msg {
					t.Errorf("%s, chunk quoting %.30q: StripMarkers(%q)\n = %q\nwant %q", format, line, turn, got, msg)
				}
			}
		}
	}
}
