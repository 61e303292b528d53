package extractor

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode"
)

func TestRequiredLiterals(t *testing.T) {
	for _, c := range []struct {
		re   string
		want []string
	}{
		{`(?i)\bmy\s+name\s+is\s+`, []string{"name"}},
		{`(?i)\bi\s+grew\s+up\s+in\s+`, []string{"grew"}},
		{`(?i)\bi\s+(?:now\s+)?live\s+in\s+`, []string{"live"}},
		{`(?i)(allergic)\s+to`, []string{"allergic"}},
		{`(?i)(?:named)+\s+x`, []string{"named"}},
		{`(?i)(?:like|love|enjoy)\s+`, []string{"enjoy", "ike", "ove"}}, // the parser factors out the l
		{`(?i)\bi(?:['’]?m|\s+am)\s+(?:unemployed|out\s+of\s+work|jobless)\b`, []string{"jobless", "unemployed", "work"}},
		{`(?i)\bi(?:['’]?m|\s+am)\s+`, nil},         // "m" is one rune
		{`(?i)\bi\s+(?:really\s+)?`, nil},           // one rune at most
		{`(?i)\b(?:tea)?\s+time`, []string{"time"}}, // an optional one is not required
		{`(?i)(?:tea|\d+)\s+`, nil},                 // a branch without a literal
		{`(?i)st\s+straße`, []string{"straße"}},     // folded rune by rune
	} {
		got := requiredLiterals(regexp.MustCompile(c.re))
		var want []string
		for _, w := range c.want {
			want = append(want, foldCase(w))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("requiredLiterals(%s) = %q, want %q", c.re, got, want)
		}
	}
}

// TestRuleLiteralsAreNecessary: for every rule with a literal, a text it
// matches contains the literal once folded, however the text is cased,
// the Kelvin sign and the long s (which (?i) matches for k and s)
// included: the filter in ruleItems never skips a rule that would match.
func TestRuleLiteralsAreNecessary(t *testing.T) {
	texts := []string{
		"My name is Dana and I live in Lisbon, but I grew up in Porto.",
		"MY NAME IS DANA. I LIVE IN LISBON.",
		"my naMe iſ Dana", "I wor\u212A at Acme", "I WORK FOR ACME and i'm allergic to peanuts",
		"I no longer live in Oslo; I moved to Bergen. My email is a@b.c and my birthday is May 3.",
		"We adopted a puppy named Biscuit. My daughter's name is Ana. I speak French and Spanish.",
		"I used to smoke but I quit. I drive a Honda Civic. My favourite colour is green.",
		"I'm vegan, I'm married and I'm 34 years old. I really love hiking and I can't stand mushrooms.",
		"i am between jobs; I was laid off. My hobby is chess and my goal is to run a marathon. I was born on May 3.",
		"I LOVE TEA, I ADORE JAZZ. I'm employed at Acme. We adopted a dog named Rex. I don't eat pork.",
	}
	n := 0
	for _, r := range ruleTable() {
		if r.lits == nil {
			continue
		}
		n++
		for _, text := range texts {
			if r.re.MatchString(text) && !containsAny(foldCase(text), r.lits) {
				t.Errorf("%s matches %q, whose folded text lacks each of its literals %q", r.re, text, r.lits)
			}
		}
	}
	if n < len(ruleTable())*3/4 {
		t.Errorf("%d of %d rules have literals; want most (the filter would gain little)", n, len(ruleTable()))
	}
}

func TestFoldCase(t *testing.T) {
	for _, c := range [][2]string{
		{"Name", "NAME"}, {"naMe", "NAME"},
		{"ſ", "S"}, {"\u212A", "K"}, // the long s and the Kelvin sign fold with s and k
		{"Ärger", foldCase("ärger")}, {"東京", "東京"},
	} {
		if got := foldCase(c[0]); got != c[1] {
			t.Errorf("foldCase(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// TestRuleLiteralsHoldForGeneratedMatches: texts generated from each
// rule's syntax (random branches, repeats and cases, the Kelvin sign and
// the long s for k and s), padded with words, that the rule matches all
// hold one of its literals once folded.
func TestRuleLiteralsHoldForGeneratedMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	matched := 0
	for _, r := range ruleTable() {
		if r.lits == nil {
			continue
		}
		parsed, err := syntax.Parse(r.re.String(), syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		parsed = parsed.Simplify()
		for range 500 {
			var b strings.Builder
			b.WriteString("so ")
			generate(rng, parsed, &b)
			b.WriteString(" ok")
			text := b.String()
			if !r.re.MatchString(text) {
				continue // a word boundary or a class the generator missed
			}
			matched++
			if !containsAny(foldCase(text), r.lits) {
				t.Fatalf("%s matches %q, whose folded text lacks each of its literals %q", r.re, text, r.lits)
			}
		}
	}
	if matched < 10000 {
		t.Errorf("only %d generated texts matched their rule; want most of 40,000", matched)
	}
}

// generate writes a random text n matches, or tries to (anchors and word
// boundaries are not enforced).
func generate(rng *rand.Rand, n *syntax.Regexp, b *strings.Builder) {
	pick := func(r rune) rune {
		if n.Flags&syntax.FoldCase == 0 {
			return r
		}
		// Any rune of the orbit: an upper or lower case, or the Kelvin
		// sign or the long s.
		orbit := []rune{r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			orbit = append(orbit, f)
		}
		return orbit[rng.IntN(len(orbit))]
	}
	repeat := func(lo, hi int) {
		for range lo + rng.IntN(hi-lo+1) {
			generate(rng, n.Sub[0], b)
		}
	}
	switch n.Op {
	case syntax.OpLiteral:
		for _, r := range n.Rune {
			b.WriteRune(pick(r))
		}
	case syntax.OpCharClass:
		i := 2 * rng.IntN(len(n.Rune)/2)
		lo, hi := n.Rune[i], min(n.Rune[i+1], n.Rune[i]+25)
		b.WriteRune(lo + rune(rng.IntN(int(hi-lo)+1)))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteRune('x')
	case syntax.OpCapture:
		generate(rng, n.Sub[0], b)
	case syntax.OpStar:
		repeat(0, 2)
	case syntax.OpPlus:
		repeat(1, 3)
	case syntax.OpQuest:
		repeat(0, 1)
	case syntax.OpRepeat:
		hi := n.Max
		if hi < 0 {
			hi = n.Min + 2
		}
		repeat(n.Min, min(hi, n.Min+3))
	case syntax.OpConcat:
		for _, sub := range n.Sub {
			generate(rng, sub, b)
		}
	case syntax.OpAlternate:
		generate(rng, n.Sub[rng.IntN(len(n.Sub))], b)
	}
}
