package chunker

import (
	"slices"
	"strings"
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

// TestSetextNotAfterListOrQuote: a "---" or "===" line under a list item,
// a quote or a table row is not a setext underline (CommonMark: a list item
// then a thematic break; a quote's lazy continuation). Taking it for one
// made the item a heading, dropped its words from every chunk's text and,
// for "===", reset the heading path ("Doc" lost).
func TestSetextNotAfterListOrQuote(t *testing.T) {
	src := "# Doc\n\n- first item about ferrets\n---\n\nText about voles.\n\n> a quote about moles\n===\n\nMore about shrews.\n\n1. numbered item\n---\n\n| a | b |\n---\n\nEnd.\n"
	cs, err := Split(src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		t.Logf("%q %q", c.Headings, c.Text)
		if !slices.Equal(c.Headings, []string{"Doc"}) {
			t.Errorf("chunk %q has heading path %q, want [Doc]", c.Text, c.Headings)
		}
	}
	var all string
	for _, c := range cs {
		all += c.Text + "\n"
	}
	for _, w := range []string{"ferrets", "moles", "numbered item", "| a | b |"} {
		if !strings.Contains(all, w) {
			t.Errorf("no chunk holds %q", w)
		}
	}
}

// TestEmptyATXHeading: a heading line "#" alone (an empty heading) closes
// the deeper sections as any level-1 heading, but puts no empty title in
// the path: a chunk under it had [""] (stored as no path at all) and one
// under its subheading ["", "Deep"], cited as "doc.md ›  › Deep".
func TestEmptyATXHeading(t *testing.T) {
	src := "# Top\n\n## Sub\n\nUnder sub.\n\n#\n\nUnder the empty heading.\n\n### Deep\n\nDeep text.\n"
	cs, err := Split(src, Config{})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"Top", "Sub"}, {}, {"Deep"}}
	if len(cs) != len(want) {
		t.Fatalf("%d chunks, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if !slices.Equal(c.Headings, want[i]) {
			t.Errorf("chunk %q: heading path %q, want %q", c.Text, c.Headings, want[i])
		}
	}
}

// TestHeadingMarkup: a heading's inline markup (a badge image, a link, an
// HTML anchor, emphasis around the title) is not in its heading path: on
// READMEs the badge's URLs were a dozen heading words of every chunk and
// ~190 bytes of every citation.
func TestHeadingMarkup(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"# JetStream Simplified Client [![JetStream API Reference](https://pkg.go.dev/badge/github.com/nats-io/nats.go/jetstream.svg)](https://pkg.go.dev/github.com/nats-io/nats.go/jetstream)\n\ntext\n", "JetStream Simplified Client"},
		{"### [github.com/jackc/pgmock](https://github.com/jackc/pgmock)\n\ntext\n", "github.com/jackc/pgmock"},
		{"#### __Single fetch__\n\ntext\n", "Single fetch"},
		{"## <a name=\"tls\"></a>TLS options\n\ntext\n", "TLS options"},
		{"Setext [with a link](http://x.example/y)\n---\n\ntext\n", "Setext with a link"},
		{"## Using `Consume()` to receive messages\n\ntext\n", "Using `Consume()` to receive messages"},
		{"## snake_case_name and *not* wrapped\n\ntext\n", "snake_case_name and *not* wrapped"},
		{"## [![badge](http://b.example/b.svg)](http://b.example)\n\ntext\n", "[![badge](http://b.example/b.svg)](http://b.example)"},
		// Code spans stay (a review: "`Vec<T>`" read "`Vec`"), and so
		// does emphasis that does not wrap the whole title.
		{"## `Vec<T>` and `Option<String>`\n\ntext\n", "`Vec<T>` and `Option<String>`"},
		{"## The `<br>` tag\n\ntext\n", "The `<br>` tag"},
		{"## ``[a](b)`` syntax, [a link](http://x.example)\n\ntext\n", "``[a](b)`` syntax, a link"},
		{"## **Note** and **Warning**\n\ntext\n", "**Note** and **Warning**"},
		{"## *args and **kwargs*\n\ntext\n", "*args and **kwargs*"},
	} {
		cs, err := Split(tt.src, Config{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || len(cs[0].Headings) != 1 || cs[0].Headings[0] != tt.want {
			var got []string
			if len(cs) > 0 {
				got = cs[0].Headings
			}
			t.Errorf("%q: heading path %q, want [%q]", tt.src, got, tt.want)
		}
	}
}

// TestFrontMatter: YAML front matter is the document's metadata, not a
// chunk: its title is the first heading of the path (replaced by a "# "
// heading, as any level-1 heading replaces it), and the rest is left out;
// a "---" followed by anything else stays Markdown's (a knowledge-base
// walk: 62 of 289 real documents' front matter was a chunk with no path).
func TestFrontMatter(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		paths     [][]string // each chunk's heading path
		texts     []string   // each chunk's text
	}{
		{"title", "---\ntitle: \"Keepalive\"\nweight: 3\ntags:\n  - grpc\n- x\n---\n\n## What should I set?\n\nThe server's policy.\n",
			[][]string{{"Keepalive", "What should I set?"}}, []string{"The server's policy."}},
		{"title and a heading", "---\r\ntitle: Setup\r\n---\r\n# Setup\r\n\r\nRun it.\r\n",
			[][]string{{"Setup"}}, []string{"Run it."}},
		{"no title", "---\nlayout: page\n...\nText first.\n\n# Later\n\nMore.\n",
			[][]string{nil, {"Later"}}, []string{"Text first.", "More."}},
		{"a thematic break", "---\nJust a line of text.\n---\n\nMore text.\n",
			[][]string{nil}, []string{"---\nJust a line of text.\n---\n\nMore text."}},
		{"unclosed", "---\ntitle: x\n\nbody\n",
			[][]string{nil}, []string{"---\ntitle: x\n\nbody"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := Split(tt.src, Config{})
			if err != nil {
				t.Fatal(err)
			}
			var paths [][]string
			var texts []string
			for _, c := range cs {
				paths, texts = append(paths, c.Headings), append(texts, c.Text)
			}
			if !slices.EqualFunc(paths, tt.paths, slices.Equal) || !slices.Equal(texts, tt.texts) {
				t.Errorf("chunks %q with paths %q, want %q with %q", texts, paths, tt.texts, tt.paths)
			}
		})
	}
}
