package extractor

import (
	"regexp"
	"slices"
	"testing"
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
