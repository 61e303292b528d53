package chunker

import (
	"fmt"
	"strings"
	"testing"
)

// TestLongCodeBlockReopensItsFence: a fenced code block longer than a
// chunk is cut between lines, and each piece reads as code: a chunk that
// starts inside it opens with the fence's line (its info string kept), one
// that ends inside it closes the fence. Before, the later chunks started
// mid-code with no fence.
func TestLongCodeBlockReopensItsFence(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Code\n\nIntro.\n\n~~~~python title=\"x.py\"\n")
	for i := range 40 {
		fmt.Fprintf(&b, "value_%02d = compute(%d)  # step %d\n", i, i, i)
	}
	b.WriteString("~~~~\n\nAfter.\n")
	src := b.String()
	cfg := Config{MaxTokens: 64, Overlap: -1}
	cs, err := Split(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkContinued(t, src, cfg, cs)
	var code []Chunk
	for _, c := range cs {
		if strings.Contains(c.Text, "value_") {
			code = append(code, c)
		}
	}
	if len(code) < 3 {
		t.Fatalf("%d chunks of code, want the block cut: %+v", len(code), cs)
	}
	for i, c := range code {
		if !strings.HasPrefix(c.Text, "~~~~python title=\"x.py\"\n") && !strings.Contains(c.Text, "\n~~~~python title=\"x.py\"\n") {
			t.Errorf("code chunk %d does not open the fence: %q", i, c.Text)
		}
		if !strings.Contains(c.Text[strings.LastIndex(c.Text, "value_"):], "\n~~~~") {
			t.Errorf("code chunk %d does not close the fence: %q", i, c.Text)
		}
	}
}

// TestLongTableRepeatsItsHeader: a table longer than a chunk is cut
// between rows, and a chunk that starts after its header row opens with
// the header and the delimiter row. Before, it started with bare rows.
func TestLongTableRepeatsItsHeader(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Limits\n\n| Setting | Default | Meaning |\n|:---|---:|---|\n")
	for i := range 30 {
		fmt.Fprintf(&b, "| opt_%02d | %d | what option %d does |\n", i, i*10, i)
	}
	b.WriteString("\nNo pipe table:\n\nname | size\n--- | ---\n")
	for i := range 30 {
		fmt.Fprintf(&b, "file%02d | %d KB\n", i, i)
	}
	src := b.String()
	for _, cfg := range []Config{{MaxTokens: 48, Overlap: -1}, {MaxTokens: 64, Overlap: 20}} {
		cs, err := Split(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		checkContinued(t, src, cfg, cs)
		rows := 0
		for i, c := range cs {
			switch {
			case strings.Contains(c.Text, "| opt_"):
				rows++
				if !strings.HasPrefix(c.Text, "| Setting | Default | Meaning |\n|:---|---:|---|\n") {
					t.Errorf("%+v: chunk %d has no header: %q", cfg, i, c.Text)
				}
			case strings.Contains(c.Text, "file") && !strings.Contains(c.Text, "No pipe"):
				rows++
				if !strings.HasPrefix(c.Text, "name | size\n--- | ---\n") {
					t.Errorf("%+v: chunk %d has no header: %q", cfg, i, c.Text)
				}
			}
		}
		if rows < 4 {
			t.Fatalf("%+v: %d chunks of rows, want both tables cut", cfg, rows)
		}
	}
}

// openFence is the fence of a code block text opens and does not close,
// "" when there is none.
func openFence(text string) string {
	fence := ""
	for _, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(l, " ")
		if len(l)-len(trimmed) > 3 {
			continue
		}
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			c := trimmed[:1]
			fence = strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c)))
		}
	}
	return fence
}

// checkContinued holds what every chunk keeps with a continued block:
// within the size, trimmed, its source slice in its text, which adds only
// a fence's or a table header's lines, and no code fence left open.
func checkContinued(t *testing.T, src string, cfg Config, cs []Chunk) {
	t.Helper()
	cfg = cfg.WithDefaults()
	for i, c := range cs {
		if c.Tokens != Tokens(c.Text) || c.Tokens > cfg.MaxTokens {
			t.Errorf("chunk %d: %d tokens (counted %d), max %d", i, c.Tokens, Tokens(c.Text), cfg.MaxTokens)
		}
		if !strings.Contains(c.Text, src[c.Start:c.End]) {
			t.Errorf("chunk %d: its source %q is not in its text %q", i, src[c.Start:c.End], c.Text)
		}
		if c.Text != strings.TrimRight(c.Text, " \t\r\n") || strings.TrimLeft(c.Text, " \t") != strings.TrimSpace(c.Text) {
			t.Errorf("chunk %d is not trimmed but for its first line's indentation: %q", i, c.Text)
		}
		if fence := openFence(c.Text); fence != "" {
			t.Errorf("chunk %d leaves the fence %q open: %q", i, fence, c.Text)
		}
	}
}

// TestOverlapDoesNotStartInsideCodeBlock: a chunk ending with a code block
// that fits in it is followed by one whose overlap is not the block's
// tail. Before, at the default size and overlap, the next chunk opened
// with the block's last words and its closing fence, which there opened a
// fence of its own: the prose after it read as code, and in enrich's
// markdown injection the rest of the injection with it.
func TestOverlapDoesNotStartInsideCodeBlock(t *testing.T) {
	t.Parallel()
	src := "# Setup\n\n" + strings.Repeat("Install the tool and run it once so that it writes its configuration file. ", 6) +
		"\n\n```sh\nmemoryd serve \\\n  --database-url postgres://localhost/memoryd \\\n  --nats-url nats://localhost:4222 \\\n  --enrich-max-conns 2\n```\n\n" +
		strings.Repeat("The server now listens and answers enrich requests on its subject. ", 8) + "\n"
	for _, cfg := range []Config{{}, {MaxTokens: 120, Overlap: 40}} {
		cs, err := Split(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) < 2 {
			t.Fatalf("%+v: %d chunks, want the section cut after the code block", cfg, len(cs))
		}
		checkContinued(t, src, cfg, cs)
	}
}
