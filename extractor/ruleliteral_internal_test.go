package extractor

import (
	"regexp"
	"strings"
	"testing"
)

func TestRequiredLiteral(t *testing.T) {
	for _, c := range []struct{ re, want string }{
		{`(?i)\bmy\s+name\s+is\s+`, "NAME"},
		{`(?i)\bi\s+grew\s+up\s+in\s+`, "GREW"},
		{`(?i)\bi\s+(?:now\s+)?live\s+in\s+`, "LIVE"},
		{`(?i)(allergic)\s+to`, "ALLERGIC"},
		{`(?i)(?:named)+\s+x`, "NAMED"},
		{`(?i)\bi(?:['’]?m|\s+am)\s+`, ""}, // no literal every match holds
		{`(?i)(?:like|love)\s+`, ""},       // an alternation
		{`(?i)\bi\s+(?:really\s+)?`, ""},   // one rune at most
		{`(?i)\b(?:tea)?\s+time`, "TIME"},  // an optional one is not required
		{`(?i)st\s+straße`, "straße"},      // folded rune by rune
	} {
		if got := requiredLiteral(regexp.MustCompile(c.re)); got != foldCase(c.want) {
			t.Errorf("requiredLiteral(%s) = %q, want %q", c.re, got, foldCase(c.want))
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
	}
	n := 0
	for _, r := range ruleTable() {
		if r.lit == "" {
			continue
		}
		n++
		for _, text := range texts {
			if r.re.MatchString(text) && !strings.Contains(foldCase(text), r.lit) {
				t.Errorf("%s matches %q, whose folded text lacks its literal %q", r.re, text, r.lit)
			}
		}
	}
	if n < len(ruleTable())/2 {
		t.Errorf("%d of %d rules have a literal; want most (the filter would gain little)", n, len(ruleTable()))
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
