package extractor

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxRequiredLiterals bounds the alternatives requiredLiterals returns: past
// it, the cost of looking for each outweighs the regexp's.
const maxRequiredLiterals = 16

// requiredLiterals returns literals, case-folded (foldCase), one of which
// every match of re holds, each of at least two runes; nil when it finds
// none. A clause whose folded text contains none of them cannot match re.
// They are found in re's syntax: a literal holds itself; a capture or a
// repetition of at least once what its operand holds; an alternation one
// of what each of its branches holds; a concatenation what the best of
// its terms holds (the longest shortest literal, then the fewest).
func requiredLiterals(re *regexp.Regexp) []string {
	parsed, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	lits := required(parsed.Simplify())
	if len(lits) == 0 || shortest(lits) < 2 {
		return nil
	}
	out := make([]string, len(lits))
	for i, l := range lits {
		out[i] = foldCase(l)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// required is what requiredLiterals finds for one node: nil when a match
// of it need hold no literal.
func required(n *syntax.Regexp) []string {
	switch n.Op {
	case syntax.OpLiteral:
		return []string{string(n.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return required(n.Sub[0])
	case syntax.OpRepeat:
		if n.Min >= 1 {
			return required(n.Sub[0])
		}
	case syntax.OpAlternate:
		var all []string
		for _, sub := range n.Sub {
			lits := required(sub)
			if lits == nil || len(all)+len(lits) > maxRequiredLiterals {
				return nil
			}
			all = append(all, lits...)
		}
		return all
	case syntax.OpConcat:
		var best []string
		for _, sub := range n.Sub {
			lits := required(sub)
			if lits != nil && (best == nil || shortest(lits) > shortest(best) ||
				shortest(lits) == shortest(best) && len(lits) < len(best)) {
				best = lits
			}
		}
		return best
	}
	return nil
}

// shortest is the length in runes of the shortest of lits.
func shortest(lits []string) int {
	n := -1
	for _, l := range lits {
		if c := utf8.RuneCountInString(l); n < 0 || c < n {
			n = c
		}
	}
	return n
}

// containsAny reports whether s contains one of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
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
