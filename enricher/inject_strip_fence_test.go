package enricher

import (
	"regexp"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestEchoedInjectionWithTrickyFencesIsStripped: a chunk whose fenced
// code keeps blank lines is removed whole by StripMarkers however its
// other lines look like fences to a reader that does not read them as
// the enricher wrote them: a numbered line ending in a fence ("2. ```",
// prose), a line of a fence indented past its opener (code, no close),
// the format's own heading or preamble inside the code (a page of
// memoryd's docs). Before, StripMarkers read each as opening or closing
// a fence, stopped the chunk at the code's next blank line and kept the
// rest of the injection as the user's text.
func TestEchoedInjectionWithTrickyFencesIsStripped(t *testing.T) {
	t.Parallel()
	chunks := map[string]string{
		"numbered fence prose":  "Steps:\n2. ```\n```\ncode\n\nmore\n```",
		"closer indented past":  "```\nx\n        ```\n\ny\n```",
		"heading in code":       "```markdown\n" + events.MarkdownHeading + "\n\n### Facts\n- **city**: Paris\n```",
		"preamble in code":      "```text\n" + events.SystemPreamble + "\n\nFacts about the user:\n1. city: Paris\n```",
		"tilde inside backtick": "```\n~~~\n\nz\n```",
	}
	msg := "What's my dog's name?"
	for name, text := range chunks {
		for _, format := range []string{events.FormatSystem, events.FormatMarkdown} {
			inj := renderDocs(format, nil, nil, cleanChunks([]events.DocumentChunk{{Source: "a.md", Text: text, Score: 0.5}, testChunks[1]}))
			flat := regexp.MustCompile(`(?m)^ +`).ReplaceAllString(inj, "")
			turns := []string{inj + "\n\n" + msg, msg + "\n\n" + inj}
			if !strings.Contains(name, "in code") {
				// An opening at the margin ends a chunk (StripMarkers).
				turns = append(turns, flat+"\n\n"+msg)
			}
			for _, turn := range turns {
				if got := extractor.StripMarkers(turn); got != msg {
					t.Errorf("%s, %s: StripMarkers(%q)\n = %q\nwant %q", format, name, turn, got, msg)
				}
			}
		}
	}
}
