package chunker

import (
	"slices"
	"testing"
)

// A Markdown file saved with a UTF-8 byte order mark (Windows Notepad,
// many editors on Windows) loses its first heading: "\ufeff# Title" is not
// an ATX heading, so the title is not in any chunk's heading path and the
// first chunk's text starts with the BOM and a literal "# Title".
func TestSplitBOMFirstHeading(t *testing.T) {
	src := "\ufeff# BOM document\r\n\r\nIntro text.\r\n\r\n## Resetting the router\r\n\r\nHold the reset button for thirty seconds.\r\n"
	cs, err := Split(src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Logf("%q %q", c.Headings, c.Text)
	}
	last := cs[len(cs)-1]
	if want := []string{"BOM document", "Resetting the router"}; !slices.Equal(last.Headings, want) {
		t.Errorf("last chunk's heading path = %q, want %q", last.Headings, want)
	}
	if want := []string{"BOM document"}; !slices.Equal(cs[0].Headings, want) {
		t.Errorf("first chunk's heading path = %q, want %q (text %q)", cs[0].Headings, want, cs[0].Text)
	}
}

// TestHeadingAttributes: a heading's trailing attribute block (Pandoc,
// kramdown: "{#history}", "{.unnumbered}") is not in its title; braces
// that are the title's words stay.
func TestHeadingAttributes(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"## GODEBUG History {#history}", "GODEBUG History"},
		{"# Intro {.unnumbered #intro}", "Intro"},
		{"## Setup {data-x=1} ##", "Setup"},
		{"## The {braces} in Go", "The {braces} in Go"},
		{"## Sets {a, b}", "Sets {a, b}"},
		{"## {#only}", "{#only}"},
	} {
		if got := atxTitle(tt.line, atxLevel(tt.line)); got != tt.want {
			t.Errorf("atxTitle(%q) = %q, want %q", tt.line, got, tt.want)
		}
	}
}
