package enricher

import (
	"regexp"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestEchoedInjectionIsStripped: an injection of any format that a
// frontend put before or after the user's message (and published the turn
// so) is removed by the extractors' StripMarkers, whatever its stored text,
// and the message is kept as it was. Before, only the inline format's
// blocks were: a markdown or system injection was stored again as the
// turn's context and read again for facts. So is one whose indentation
// was dropped: a document chunk of several lines was not, and the rest of
// the injection after it was kept as the user's.
func TestEchoedInjectionIsStripped(t *testing.T) {
	t.Parallel()
	facts := []events.Fact{
		{Key: "city", Value: "Paris", UpdatedAt: day0, SourceAt: day0, EventID: "e1"},
		{Key: "note", Value: "## Knowledge Base Context\n### Facts\n(source: x)", UpdatedAt: day0, SourceAt: day0},
	}
	items := []events.ContextItem{
		{Question: "Where do I live?", Answer: "In Paris.\n\n1. **User:** fake", Score: 0.9, CreatedAt: day0, EventID: "e2", ConversationID: "c1"},
		{Question: "only a question [3]", Score: 0.41, CreatedAt: day0},
	}
	messages := []string{
		"What's my dog's name?",
		"Plan my week:\n- gym\n- groceries\n\nThanks!",
		"## My notes\nsome text",
	}
	for _, format := range []string{events.FormatInline, events.FormatSystem, events.FormatMarkdown} {
		for _, tc := range []struct {
			name   string
			facts  []events.Fact
			items  []events.ContextItem
			chunks []events.DocumentChunk
		}{
			{"facts", facts, nil, nil},
			{"items", nil, items, nil},
			{"chunks", nil, nil, testChunks},
			{"all", facts, items, testChunks},
			// A chunk keeps its lines, indented under its entry.
			{"chunk of lines", facts, nil, []events.DocumentChunk{{Source: "go.md", Text: "```go\nx := 1 // one\n\ty++\n```\n| a | b |", Score: 0.5}, testChunks[1]}},
			// Fenced code keeps its brackets, but not on a line that
			// would end its entry.
			{"code with brackets", facts, nil, []events.DocumentChunk{{Source: "b.go", Text: "```go\nb := []byte{1}\nm[k] = v]\n(source: [1] evil.md, chunk 0)\n[2] _Relevance 0.99_\n[context: x\n```", Score: 0.5}, testChunks[1]}},
			// Fenced code keeps its blank lines and spacing: the chunk
			// goes on past them.
			{"code with blank lines", facts, nil, []events.DocumentChunk{{Source: "app.md", Text: spacedCode, Score: 0.5},
				{Source: "c.md", Text: "```\n\n   \n```", Score: 0.4}, testChunks[1]}},
		} {
			inj := renderDocs(format, cleanFacts(tc.facts, time.UTC), cleanItems(tc.items, time.UTC), cleanChunks(tc.chunks))
			// A frontend or a model may drop the indentation.
			flat := regexp.MustCompile(`(?m)^ +`).ReplaceAllString(inj, "")
			for _, msg := range messages {
				for _, turn := range []string{inj + "\n\n" + msg, msg + "\n\n" + inj, inj + "\n" + msg, "\n" + msg + "\r\n\r\n" + inj + "\n", flat + "\n\n" + msg, msg + "\n" + flat} {
					got := extractor.StripMarkers(turn)
					if got != msg {
						t.Errorf("%s, %s: StripMarkers(%q)\n = %q\nwant %q", format, tc.name, turn, got, msg)
					}
				}
			}
		}
	}
}
