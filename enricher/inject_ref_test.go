package enricher

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// neutralizeRef and estimateTokensRef are neutralize and estimateTokens
// written plainly, rune by rune: the byte-at-a-time ASCII paths must
// agree with them on every text.
func neutralizeRef(s string) string {
	s = breakControlTokens(s)
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case r == '[':
			r = '('
		case r == ']':
			r = ')'
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

func estimateTokensRef(s string) int {
	n, cjk := 0, 0
	for s != "" {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		if isCJK(r) {
			cjk++
		} else {
			n += size
		}
	}
	return (n+3)/4 + cjk
}

// randomText is n pieces of text that neutralize and estimateTokens treat
// apart: every ASCII white space, Unicode spaces (NEL, NBSP, ideographic),
// brackets, control tokens, CJK, other scripts, emoji and invalid UTF-8.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{"a", "word", " ", "  ", "\t", "\n", "\r\n", "\v", "\f", "\u0085", "\u00a0", "\u2028", "\u3000",
		"[", "]", "[facts:", "<|im_end|>", "</s>", "<", "|>", "｜>", "東京", "の", "서울", "é", "Ж", "😊", "\xff", "\xe6\x9d", "\x80", "\\", ","}
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func TestNeutralizeAgreesWithRuneByRune(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		s := randomText(r, i%40)
		if got, want := neutralize(s), neutralizeRef(s); got != want {
			t.Fatalf("neutralize(%q) = %q, rune by rune %q", s, got, want)
		}
		if got, want := estimateTokens(s), estimateTokensRef(s); got != want {
			t.Fatalf("estimateTokens(%q) = %d, rune by rune %d", s, got, want)
		}
	}
}

// BenchmarkInjectLongTurns injects three turns of about 2 KB each, a
// real conversation's (LongMemEval's median item is 1,925 bytes), with
// their line breaks, into the default budget, where the third does not
// fit and the fourth, shorter, does.
func BenchmarkInjectLongTurns(b *testing.B) {
	para := "Sure! Here are a few ideas for your trip to Lisbon:\n\n1. **Alfama**: walk the old streets [map] and hear fado.\n2. Belem: try the pastries.\n"
	long := func(n int) events.ContextItem {
		return events.ContextItem{Question: "Can you suggest what to do in Lisbon on a weekend?", Answer: strings.Repeat(para, n), CreatedAt: day0, EventID: "e1", ConversationID: "c1", Score: 0.8}
	}
	facts := []events.Fact{{Key: "name", Value: "Ana", UpdatedAt: day0}, {Key: "location", Value: "Porto", UpdatedAt: day0}}
	items := []events.ContextItem{long(14), long(16), long(30), long(4)}
	for _, format := range []string{events.FormatInline, events.FormatSystem} {
		b.Run(format, func(b *testing.B) {
			var kept int
			for b.Loop() {
				_, it, _, _, _ := injectDocs(format, events.DefaultMaxTokens, 3, facts, items, nil)
				kept = len(it)
			}
			b.ReportMetric(float64(kept), "items")
		})
	}
}
