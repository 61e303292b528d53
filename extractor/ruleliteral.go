package extractor

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// requiredLiteral returns the longest literal (of at least two runes) that
// every match of re holds, case-folded (foldCase), or "" when it finds
// none: a literal that is a term of re's top-level concatenation, bare, in
// a capture, or repeated at least once. A clause whose folded text does
// not contain it cannot match re.
func requiredLiteral(re *regexp.Regexp) string {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return ""
	}
	parsed = parsed.Simplify()
	terms := []*syntax.Regexp{parsed}
	if parsed.Op == syntax.OpConcat {
		terms = parsed.Sub
	}
	var best []rune
	for _, t := range terms {
		for {
			if t.Op == syntax.OpCapture || (t.Op == syntax.OpPlus || t.Op == syntax.OpRepeat && t.Min >= 1) && len(t.Sub) == 1 {
				t = t.Sub[0]
				continue
			}
			break
		}
		if t.Op == syntax.OpLiteral && len(t.Rune) > len(best) {
			best = t.Rune
		}
	}
	if len(best) < 2 {
		return ""
	}
	return foldCase(string(best))
}

// foldCase maps each rune of s to the least rune it matches case-insensitively
// (its simple case-folding orbit, as regexp's (?i) folds), so that a text
// (?i) matches a literal in contains that literal folded.
func foldCase(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			// An ASCII letter's least is its capital (k's orbit holds the
			// Kelvin sign and s's the long s, both above).
			if 'a' <= r && r <= 'z' {
				return r - 'a' + 'A'
			}
			return r
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}
