package extractor

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

func TestStripMarkers(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "no markers", in: "  hello there \n", want: "hello there"},
		{name: "plain brackets kept", in: "see [1] and [note: x]", want: "see [1] and [note: x]"},
		{name: "facts prefix", in: "[facts: name=Ana; location=Lisbon]\nWhat should I cook?", want: "What should I cook?"},
		{name: "context prefix", in: "[context: q=a a=b] hi", want: "hi"},
		{name: "both", in: "[facts: a=b]\n[context: x]\nreal text", want: "real text"},
		{name: "enricher block shape",
			in:   "[facts: city=Paris, name=Alice]\n[context: User: What is my dog called?\nAssistant: Your dog is called Rex.]\n\nWhat's my dog's name?",
			want: "What's my dog's name?"},
		{name: "case insensitive", in: "[FACTS: x] [Context: y] hi", want: "hi"},
		{name: "spaces in opener", in: "[ facts : x ] hi", want: "hi"},
		{name: "inline keeps one space", in: "before [facts: x] after", want: "before after"},
		{name: "nested brackets", in: "[facts: list=[a, [b]], x=[c]] tail", want: "tail"},
		{name: "multi-line", in: "head\n[context:\n  q: where?\n  a: [there]\n]\nbody", want: "head\n\nbody"},
		{name: "unclosed removes to end", in: "keep this [facts: name=Ana\nmore", want: "keep this"},
		{name: "unclosed nested", in: "x [context: [a] [b", want: "x"},
		{name: "marker at end", in: "text [facts:", want: "text"},
		{name: "only marker", in: "[facts: a]", want: ""},
		{name: "adjacent blocks", in: "[facts: a][context: b]c", want: "c"},
		{name: "stray closing bracket kept", in: "a] [facts: b] c]", want: "a] c]"},
		{name: "word facts without bracket kept", in: "facts: the sky is blue", want: "facts: the sky is blue"},
		{name: "unicode around", in: "olá [facts: nome=Zoë] ção", want: "olá ção"},
		{name: "invalid utf-8 kept outside", in: "\xff\xfe [facts: \xff] ok", want: "\xff\xfe ok"},
		{name: "marker formed by removal", in: "[fac[facts: x]ts: y] z", want: "z"},
		{name: "invalid utf-8 inside removed", in: "[context: \xc3\x28 ] fine", want: "fine"},
		{name: "the contract's markers", in: events.FactsMarker + " a=b]\n" + events.ContextMarker + " User: q] hi", want: "hi"},
		// The system and markdown injections: from their first line
		// through the last of their shapes.
		{name: "markdown before", in: events.MarkdownHeading + "\n\n### Facts\n- **city**: Paris _(source: set directly, 2026-11-01)_\n\nhi", want: "hi"},
		{name: "markdown after", in: "hi\n" + events.MarkdownHeading + "\n### Relevant memories\n1. **User:** q\n **Assistant:** a\n _Relevance 0.90; source: turn e2, 2026-11-01_", want: "hi"},
		{name: "markdown ends at a line of no shape", in: events.MarkdownHeading + "\n### Documents\n1. text [1]\n_Relevance 0.50_\nmy list:\n1. eggs", want: "my list:\n1. eggs"},
		{name: "system", in: events.SystemPreamble + "\n\nFacts about the user:\n1. city: Paris (source: set directly, 2026-11-01)\nwhat now?", want: "what now?"},
		{name: "an older system preamble", in: "Use the following retrieved context when relevant. If the context is insufficient, say what is missing.\n\nRetrieved memories:\n1. User: q (source: stored directly, 2026-11-01)\n\nok", want: "ok"},
		{name: "heading inside a line kept", in: "I wrote " + events.MarkdownHeading + " at the top", want: "I wrote " + events.MarkdownHeading + " at the top"},
		{name: "heading alone", in: "a\n" + events.MarkdownHeading + "\nb", want: "a\nb"},
		// The user's own text is kept: on the preamble's line (a frontend
		// that joined the injection and the message with a space, a turn
		// of "\r" line ends), and a list of the shapes after a blank line
		// (the formats write blank lines only before a section's header).
		{name: "message on the preamble's line", in: events.SystemPreamble + " Facts about the user: 1. city: Paris (source: set directly, 2026-11-01) My cat is Tom.", want: events.SystemPreamble + " Facts about the user: 1. city: Paris (source: set directly, 2026-11-01) My cat is Tom."},
		{name: "a user's sentence after the preamble's first", in: "Use the following retrieved context when relevant. Is that a good prompt? My name is Erin.", want: "Use the following retrieved context when relevant. Is that a good prompt? My name is Erin."},
		{name: "a user's list after a blank line", in: events.MarkdownHeading + "\n\n### Documents\n1. text [1]\n_Relevance 0.50_\n\n### Citations\n- [1] notes.txt, chunk 0\n\n1. Smith 2020 [3]\n2. Jones 2019 [4]\nsummarise these", want: "1. Smith 2020 [3]\n2. Jones 2019 [4]\nsummarise these"},
		{name: "a user's system-shaped list after a blank line", in: events.SystemPreamble + "\n\nFacts about the user:\n1. city: Paris (source: set directly, 2026-11-01)\n\n1. Buy milk (source: my list)\nok?", want: "1. Buy milk (source: my list)\nok?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := StripMarkers(tt.in); got != tt.want {
				t.Errorf("StripMarkers(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStripMarkersLarge(t *testing.T) {
	t.Parallel()

	// Many unclosed openers must not make the work quadratic or blow up.
	in := "keep " + strings.Repeat("[facts: [", 100_000)
	if got := StripMarkers(in); got != "keep" {
		t.Errorf("StripMarkers(large) = %q, want %q", got, "keep")
	}
	// Nor many injection openers, each followed by a numbered line and
	// indented lines (an event's size, MaxEventBytes): each opener read
	// all the lines after it for a document chunk's last line, 10 s a
	// call.
	for _, opener := range []string{events.SystemPreamble, events.MarkdownHeading} {
		line := "  " + opener + "\n  1. a\n"
		in := strings.Repeat(line, events.MaxEventBytes/len(line))
		if got := StripMarkers(in); got != strings.TrimSpace(strings.Repeat("  1. a\n", events.MaxEventBytes/len(line))) {
			t.Errorf("StripMarkers(many openers) = %.40q..., want their lists", got)
		}
	}
	in = strings.Repeat("[context: x] y ", 50_000)
	if got := StripMarkers(in); strings.Contains(got, "[") || !strings.HasPrefix(got, "y y") {
		t.Errorf("StripMarkers(many blocks) = %.40q..., want only the y's", got)
	}
}

func FuzzStripMarkers(f *testing.F) {
	for _, s := range []string{
		"",
		"hello",
		"[facts: a=b] hi",
		"[context: [nested [deep]] ] x",
		"[FACTS: unclosed",
		"a [facts: x] b [context: y] c",
		"\xff[facts:\xfe]\x00",
		events.MarkdownHeading + "\n### Facts\n- **a**: b _(source: x)_\n\nhi",
		events.SystemPreamble + " then the user's own words",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got := StripMarkers(in)
		if utf8.ValidString(in) && !utf8.ValidString(got) {
			t.Fatalf("StripMarkers(%q) = %q: invalid UTF-8 from valid input", in, got)
		}
		if len(got) > len(in) {
			t.Fatalf("StripMarkers(%q) = %q: output longer than input", in, got)
		}
		// Text is kept as it is unless a line of it opens an injection
		// (the heading, or the preamble alone on its line).
		formatted := false
		for _, line := range strings.Split(in, "\n") {
			line = strings.TrimSpace(line)
			formatted = formatted || line == events.MarkdownHeading ||
				strings.HasPrefix(line, systemLead) && strings.HasPrefix(events.SystemPreamble, line)
		}
		if !markerOpenRE.MatchString(in) && !formatted && got != strings.TrimSpace(in) {
			t.Fatalf("StripMarkers(%q) = %q: changed text without markers", in, got)
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("StripMarkers(%q) = %q: not trimmed", in, got)
		}
	})
}
