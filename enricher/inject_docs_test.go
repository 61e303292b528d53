package enricher

import (
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// testChunks are two chunks of one document: the second has no heading and
// text holding every format's separators and a bracket.
var testChunks = []events.DocumentChunk{
	{Collection: "kb", DocumentID: "d1", Source: "nats.go/README.md", HeadingPath: []string{"Basic Usage", "TLS"}, ChunkIndex: 3, Text: "Use nats.Secure() with a CA.", Score: 0.8123},
	{Collection: "kb", DocumentID: "d1", Source: "notes.txt", ChunkIndex: 0, Text: "a|b: *c* _d_ [x]", Score: 0.5},
}

// TestRenderDocs: each format cites every chunk in its own style, the
// markdown format with numbered citations under the context.
func TestRenderDocs(t *testing.T) {
	t.Parallel()
	facts := []events.Fact{{Key: "city", Value: "Paris", UpdatedAt: day0, SourceAt: day0, EventID: "e1"}}
	items := []events.ContextItem{{Question: "q1", Answer: "a1", Score: 0.9, CreatedAt: day0, EventID: "e2"}}
	tests := []struct {
		name, format string
		facts        []events.Fact
		items        []events.ContextItem
		chunks       []events.DocumentChunk
		want         string
	}{
		{"inline chunks only", events.FormatInline, nil, nil, testChunks,
			"[context: [1] nats.go/README.md › Basic Usage › TLS, chunk 3: Use nats.Secure() with a CA. | [2] notes.txt, chunk 0: a\\|b: *c* _d_ (x)]"},
		{"inline with facts and items", events.FormatInline, facts, items, testChunks[:1],
			"[facts: city=Paris]\n[context: User: q1\nAssistant: a1 | [1] nats.go/README.md › Basic Usage › TLS, chunk 3: Use nats.Secure() with a CA.]"},
		{"system chunks only", events.FormatSystem, nil, nil, testChunks,
			events.SystemPreamble + "\n\nRetrieved documents:\n" +
				"1. Use nats.Secure() with a CA. (source: [1] nats.go/README.md › Basic Usage › TLS, chunk 3)\n" +
				"2. a|b\\: *c* _d_ (x) (source: [2] notes.txt, chunk 0)"},
		{"system numbering continues", events.FormatSystem, facts, items, testChunks[:1],
			events.SystemPreamble + "\n\nFacts about the user:\n1. city: Paris (source: turn e1, 2026-11-01)\n" +
				"\nRetrieved memories:\n2. User: q1 Assistant: a1 (source: turn e2, 2026-11-01)\n" +
				"\nRetrieved documents:\n3. Use nats.Secure() with a CA. (source: [1] nats.go/README.md › Basic Usage › TLS, chunk 3)"},
		{"markdown chunks only", events.FormatMarkdown, nil, nil, testChunks,
			"## Knowledge Base Context\n\n### Documents\n" +
				"1. Use nats.Secure() with a CA. [1]\n   _Relevance 0.81_\n" +
				"2. a|b: \\*c\\* \\_d\\_ (x) [2]\n   _Relevance 0.50_\n" +
				"\n### Citations\n- [1] nats.go/README.md › Basic Usage › TLS, chunk 3\n- [2] notes.txt, chunk 0"},
		{"markdown with memories", events.FormatMarkdown, nil, items, testChunks[1:],
			"## Knowledge Base Context\n\n### Relevant memories\n1. **User:** q1\n   **Assistant:** a1\n   _Relevance 0.90; source: turn e2, 2026-11-01_\n" +
				"\n### Documents\n1. a|b: \\*c\\* \\_d\\_ (x) [1]\n   _Relevance 0.50_\n" +
				"\n### Citations\n- [1] notes.txt, chunk 0"},
	}
	for _, tt := range tests {
		if got := renderDocs(tt.format, cleanFacts(tt.facts, time.UTC), cleanItems(tt.items, time.UTC), cleanChunks(tt.chunks)); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// TestInjectDocsWithoutChunks: no chunks renders what inject always did.
func TestInjectDocsWithoutChunks(t *testing.T) {
	t.Parallel()
	facts := []events.Fact{{Key: "name", Value: "Alice", UpdatedAt: day0}}
	items := []events.ContextItem{{ID: 1, Question: "q", Answer: strings.Repeat("a", 400), Score: 0.9, CreatedAt: day0}}
	for _, format := range []string{events.FormatInline, events.FormatSystem, events.FormatMarkdown} {
		for _, budget := range []int{1, 20, 1000} {
			f1, i1, text1, n1 := inject(format, budget, facts, items)
			f2, i2, c2, text2, n2 := injectDocs(format, budget, len(items), facts, items, nil)
			if text1 != text2 || n1 != n2 || len(f1) != len(f2) || len(i1) != len(i2) || c2 == nil || len(c2) != 0 {
				t.Errorf("%s budget %d: inject %q, injectDocs %q (%v)", format, budget, text1, text2, c2)
			}
		}
	}
}

// TestInjectDocsBudget: facts first, then items and chunks take turns; a
// chunk that overflows is dropped whole and the kept ones are numbered in
// rank order; the budget is never exceeded.
func TestInjectDocsBudget(t *testing.T) {
	t.Parallel()
	facts := []events.Fact{{Key: "name", Value: "Alice", UpdatedAt: day0}}
	items := []events.ContextItem{
		{ID: 1, Question: "first memory", Answer: strings.Repeat("m", 200), Score: 0.9, CreatedAt: day0},
		{ID: 2, Question: "second memory", Answer: strings.Repeat("n", 200), Score: 0.8, CreatedAt: day0},
	}
	chunks := []events.DocumentChunk{
		{DocumentID: "d", Source: "a.md", ChunkIndex: 0, Text: strings.Repeat("x", 200), Score: 0.9},
		{DocumentID: "d", Source: "a.md", ChunkIndex: 1, Text: strings.Repeat("y", 2000), Score: 0.8},
		{DocumentID: "d", Source: "a.md", ChunkIndex: 2, Text: strings.Repeat("z", 100), Score: 0.7},
	}
	for _, format := range []string{events.FormatInline, events.FormatSystem, events.FormatMarkdown} {
		all := renderDocs(format, cleanFacts(facts, time.UTC), cleanItems(items, time.UTC), cleanChunks(chunks))
		f, it, c, text, tokens := injectDocs(format, estimateTokens(all), len(items), facts, items, chunks)
		if text != all || len(f) != 1 || len(it) != 2 || len(c) != 3 || c[2].Citation != 3 {
			t.Fatalf("%s: everything fits but kept %d facts, %d items, %v", format, len(f), len(it), c)
		}
		// Room for the fact, both memories, the first chunk and a little:
		// the big chunk is dropped whole, and the small last chunk does not
		// fit in what is left.
		budget := estimateTokens(renderDocs(format, cleanFacts(facts, time.UTC), cleanItems(items, time.UTC), cleanChunks([]events.DocumentChunk{chunks[0]}))) + 5
		f, it, c, text, tokens = injectDocs(format, budget, len(items), facts, items, chunks)
		if tokens > budget || tokens != estimateTokens(text) {
			t.Fatalf("%s: budget %d: tokens %d for %q", format, budget, tokens, text)
		}
		if len(f) != 1 || len(it) != 2 || len(c) != 1 || c[0].ChunkIndex != 0 || c[0].Citation != 1 || strings.Contains(text, "yyy") {
			t.Fatalf("%s: budget %d: facts %d, items %d, chunks %v", format, budget, len(f), len(it), c)
		}
		// Without the memories, the small third chunk fits after the big
		// one is dropped, and is cited as [2].
		budget = estimateTokens(renderDocs(format, cleanFacts(facts, time.UTC), nil, cleanChunks([]events.DocumentChunk{chunks[0], chunks[2]})))
		_, _, c, text, tokens = injectDocs(format, budget, len(items), facts, nil, chunks)
		if tokens > budget || len(c) != 2 || c[1].ChunkIndex != 2 || c[1].Citation != 2 || !strings.Contains(text, "[2]") {
			t.Fatalf("%s: budget %d: chunks %v in %q", format, budget, c, text)
		}
		_, _, c, text, tokens = injectDocs(format, 1, len(items), facts, items, chunks)
		if c == nil || len(c) != 0 || text != "" || tokens != 0 {
			t.Fatalf("%s: budget 1: %v %q", format, c, text)
		}
	}
}

// TestRenderDocsKeepsLines: a chunk's line breaks and indentation stay in
// every format (code with a "//" comment, a table, a list), its lines after
// the first indented under the chunk's entry, so that no line of a chunk
// starts at the injection's margin; a chunk of one line reads as before.
func TestRenderDocsKeepsLines(t *testing.T) {
	t.Parallel()
	chunks := []events.DocumentChunk{{Source: "go.md", HeadingPath: []string{"Loop"}, ChunkIndex: 1,
		Text: "```go\nfor i := 0; i < n; i++ { // count\n\tsum += i\n}\n```\n\n\n| a | b |\n|---|---|\n- item [x]", Score: 0.5}}
	tests := []struct{ format, want string }{
		{events.FormatInline, "[context: [1] go.md › Loop, chunk 1: ```go\n" +
			"  for i := 0; i < n; i++ { // count\n" +
			"      sum += i\n" +
			"  }\n" +
			"  ```\n" +
			"  \\| a \\| b \\|\n" +
			"  \\|---\\|---\\|\n" +
			"  - item (x)\n]"},
		{events.FormatSystem, events.SystemPreamble + "\n\nRetrieved documents:\n1. ```go\n" +
			"   for i := 0; i < n; i++ { // count\n" + // code as written (inject_code_test.go)
			"       sum += i\n" +
			"   }\n" +
			"   ```\n" +
			"   | a | b |\n" +
			"   |---|---|\n" +
			"   - item (x)\n" +
			"   (source: [1] go.md › Loop, chunk 1)"},
		{events.FormatMarkdown, "## Knowledge Base Context\n\n### Documents\n1. ```go\n" +
			"   for i := 0; i < n; i++ { // count\n" +
			"       sum += i\n" +
			"   }\n" +
			"   ```\n" +
			"   | a | b |\n" +
			"   |---|---|\n" +
			"   - item (x)\n" +
			"   [1] _Relevance 0.50_\n" +
			"\n### Citations\n- [1] go.md › Loop, chunk 1"},
	}
	for _, tt := range tests {
		if got := renderDocs(tt.format, nil, nil, cleanChunks(chunks)); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.format, got, tt.want)
		}
	}
}
