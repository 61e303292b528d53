package chunker

import (
	"fmt"
	"strings"
	"testing"
)

// indentLost reports the chunk of cs whose text starts after its first
// line's indentation, -1 when none does.
func indentLost(src string, cs []Chunk) int {
	for i, c := range cs {
		ls := strings.LastIndexByte(src[:c.Start], '\n') + 1
		if c.Start > ls && strings.Trim(src[ls:c.Start], " \t") == "" {
			return i
		}
	}
	return -1
}

// TestChunksKeepTheirFirstLinesIndentation: a chunk starting at an
// indented line (a code block cut between lines, a nested list item, an
// overlap) starts at the line's start, so that its first line keeps its
// indentation as its other lines do. Before, the first line lost it: a
// Go function's body read from the margin while its later lines were
// indented, and a nested item read as one of the outer list.
func TestChunksKeepTheirFirstLinesIndentation(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Code\n\nThe loop below sums the values.\n\n```go\nfunc sum(xs []int) int {\n")
	for i := range 30 {
		fmt.Fprintf(&b, "\tif xs[%d] > 0 {\n\t\ttotal += xs[%d] // step %d\n\t}\n", i, i, i)
	}
	b.WriteString("\treturn total\n}\n```\n\n# List\n\n- Outer item one.\n")
	for i := range 20 {
		fmt.Fprintf(&b, "    - Nested item %d says something about the outer one.\n", i)
	}
	src := b.String()
	for _, cfg := range []Config{{MaxTokens: 48, Overlap: -1}, {MaxTokens: 64, Overlap: 20}, {}} {
		cs, err := Split(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		check(t, src, cfg, cs)
		if i := indentLost(src, cs); i >= 0 {
			t.Errorf("%+v: chunk %d starts after its line's indentation: %q", cfg, i, cs[i].Text)
		}
		for i, c := range cs {
			for _, l := range strings.Split(c.Text, "\n") {
				if strings.HasPrefix(l, "if xs[") || strings.HasPrefix(l, "total +=") || strings.HasPrefix(l, "- Nested") {
					t.Errorf("%+v: chunk %d has the line %q at the margin", cfg, i, l)
				}
			}
		}
	}
}

// TestOverlapOnTableDelimiterRepeatsTheHeader: a table longer than a
// chunk whose next chunk's overlap starts on its delimiter row opens
// that chunk with its header row. Before, it opened with the delimiter
// row and rows no header named (docs/performance.md's flood table at
// the default size).
func TestOverlapOnTableDelimiterRepeatsTheHeader(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Results\n\n")
	for i := range 49 {
		fmt.Fprintf(&b, "word%d ", i%10)
	}
	header := "| flooding clients | --enrich-max-user-in-flight | other user p50 | p90 | p99 | other user degraded | flooding user served | load average |\n|---|---|---|---|---|---|---|---|\n"
	b.WriteString("end.\n\n" + header)
	for i := range 12 {
		fmt.Fprintf(&b, "| %d | 16 | %d.72 ms | %d.03 ms | %d.88 ms | %d of 300 | 22/s of 35/s | 5.%d |\n", 8+i, 100+i*3, 200+i*11, 300+i, i, i)
	}
	src := b.String()
	cs, err := Split(src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, src, Config{}, cs)
	for i, c := range cs {
		if strings.Contains(c.Text, "| 16 |") && !strings.Contains(c.Text, header) {
			t.Errorf("chunk %d holds rows without the header: %q", i, c.Text)
		}
	}
}

// TestFenceInsideListItem: a fence indented under a list item (four
// columns or more, up to three past the item's text) opens a code block,
// as in CommonMark, kept whole or continued like any other; and a line
// less indented than the item closes that block with the item. Before,
// it was a paragraph: cut at sentences, its blank line two blocks, its
// pieces unfenced.
func TestFenceInsideListItem(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Release\n\n1. Tag the modules:\n\n    ```shell\n    git checkout master\n\n")
	for i := range 30 {
		fmt.Fprintf(&b, "    git tag module%02d/$VERSION -m \"release module %d.\"\n", i, i)
	}
	b.WriteString("    ```\n\n2. Push the tags.\n\n   - Then check:\n\n       ~~~\n       git log --oneline\n       ~~~\n")
	src := b.String()
	for _, cfg := range []Config{{MaxTokens: 64, Overlap: 20}, {MaxTokens: 100, Overlap: -1}} {
		cs, err := Split(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		check(t, src, cfg, cs)
		for i, c := range cs {
			if strings.Contains(c.Text, "git tag") && !strings.Contains(c.Text, "    ```shell\n") {
				t.Errorf("%+v: chunk %d holds tags without the fence: %q", cfg, i, c.Text)
			}
			if strings.Contains(c.Text, "git tag") && strings.Count(c.Text, "```") != 2 {
				t.Errorf("%+v: chunk %d leaves the fence open: %q", cfg, i, c.Text)
			}
			if strings.Contains(c.Text, "git log") && !strings.Contains(c.Text, "       ~~~\n       git log --oneline\n       ~~~") {
				t.Errorf("%+v: chunk %d holds the nested item's code without its fences: %q", cfg, i, c.Text)
			}
		}
	}
	// A fence of a list item left open ends with the item: the heading
	// after it is a heading.
	cs, err := Split("- Run:\n\n  ```sh\n  make\n\n# Next\n\nAfter.\n", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || len(cs[1].Headings) != 1 || cs[1].Headings[0] != "Next" || cs[1].Text != "After." {
		t.Errorf("after a list item's open fence, chunks %+v; want the heading Next read", cs)
	}
	// Outside a list a line indented four columns is still indented
	// code, whose ``` opens nothing.
	cs, err = Split("Text.\n\n    ```\n    code\n\n# Heading\n\nMore.\n", Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[1].Text != "More." {
		t.Errorf("indented code: chunks %+v", cs)
	}
}
