package chunker

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTabIndentedIsNoFenceOrHeading: a line indented by a tab (four
// columns, CommonMark's indented code) opens no fence and is no heading,
// as one indented by four spaces is not. Before, the indentation counted
// spaces only: a tab-indented shell example's "# comment" became a
// heading of the chunks after it, and a tab-indented "```" a fence.
func TestTabIndentedIsNoFenceOrHeading(t *testing.T) {
	t.Parallel()
	src := "# Build\n\nRun these:\n\n\t# configure first\n\t./configure --prefix=/usr\n\n  \t```\n\tmake\n\nAfter the build, install it.\n"
	cs, err := Split(src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if !slices.Equal(c.Headings, []string{"Build"}) {
			t.Errorf("chunk %d is under %q, want [Build]: a tab-indented line is no heading", i, c.Headings)
		}
	}
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "install it") || !strings.Contains(cs[0].Text, "# configure first") {
		t.Errorf("%d chunks %+v, want one holding every line: a tab-indented ``` opens no fence", len(cs), cs)
	}
}

// TestTableThatFitsIsNotCut: a table that fits in a chunk is not cut,
// and no chunk's overlap starts among its rows: each of its rows is in
// a chunk with its header row. Before, a chunk cut mid-table, or
// starting its overlap at the table's last rows, opened with rows no
// header named.
func TestTableThatFitsIsNotCut(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("# Limits\n\nThe limits below apply to every user of the service.\n\n| Name | Default |\n|---|---|\n")
	for i := range 8 {
		fmt.Fprintf(&b, "| limit_%d | %d |\n", i, i*10)
	}
	b.WriteString("\n" + strings.Repeat("Raise a limit with its flag, then restart the server. ", 4) + "\n")
	src := b.String()
	for _, cfg := range []Config{{MaxTokens: 64, Overlap: 30}, {MaxTokens: 80, Overlap: 32}, {MaxTokens: 100, Overlap: 40}} {
		cs, err := Split(src, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			if strings.Contains(c.Text, "| limit_") && !strings.Contains(c.Text, "| Name | Default |\n|---|---|\n") {
				t.Errorf("%+v: chunk %d holds rows without the header: %q", cfg, i, c.Text)
			}
		}
	}
}
