package enricher

import (
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestLargestChunkTokensCountsTheInjection: docs.put's
// largest_chunk_tokens (what the docs put command warns on) counts a chunk
// as enrich's injection holds it, so a chunk whose count, with its entry's
// citation, fits a budget is injected within it. Tab-indented code (Go's)
// is the case: the injection writes a leading tab as four spaces and
// indents each line under its entry, which chunker.Tokens, counted on the
// stored text, left out.
func TestLargestChunkTokensCountsTheInjection(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("```go\nfunc walk(n *node) {\n")
	for i := range 60 {
		b.WriteString(strings.Repeat("\t", 1+i%4) + "visit(n)\n")
	}
	b.WriteString("}\n```")
	text := b.String()
	for _, format := range []string{events.FormatInline, events.FormatSystem, events.FormatMarkdown} {
		chunk := events.DocumentChunk{Source: "walk.md", HeadingPath: []string{"Walk"}, Text: text, Score: 0.9}
		bare := chunk
		bare.Text = "x\ny"
		// The entry without the chunk's text: the format's frame and
		// the citation, which docs.put cannot know.
		frame := estimateTokens(renderDocs(format, nil, nil, cleanChunks([]events.DocumentChunk{bare})))
		budget := frame + chunkInjectionTokens(text)
		_, _, kept, injection, tokens := injectDocs(format, budget, 0, nil, nil, []events.DocumentChunk{chunk})
		if len(kept) != 1 {
			t.Errorf("%s: a chunk counted %d tokens (its entry %d more) is not injected within %d: it takes %d", format,
				chunkInjectionTokens(text), frame, budget, estimateTokens(renderDocs(format, nil, nil, cleanChunks([]events.DocumentChunk{chunk}))))
			continue
		}
		if tokens > budget || !strings.Contains(injection, "visit(n)") {
			t.Errorf("%s: %d tokens for budget %d: %q", format, tokens, budget, injection)
		}
	}
}
