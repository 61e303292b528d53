package extractor

import (
	"slices"
	"strings"
	"unicode"

	"github.com/memoryd/memoryd/redact"
)

// Bounds on the current facts a prompt shows. promptFactsBytes is about 600
// tokens (at 4 bytes a token): enough for the facts a turn can touch,
// without paying for a long memory on every call.
const (
	promptFactsBytes        = 2400
	promptMaxFactValueBytes = 300 // per value; a longer one is cut and marked
)

// shownFact is a current fact as a prompt shows it.
type shownFact struct {
	key, value string
}

// factsForPrompt chooses the current facts a prompt shows, in the order it
// shows them: the facts sharing more words with text (the turns to extract
// from) first, then in the order of order (the keys, most recently stated
// first), then by key. Facts are taken in that order while their encoded
// size fits in budget; one that does not fit is skipped, and a smaller one
// after it may still be shown. It returns the facts shown and how many were
// left out. Keys in order that Facts does not hold are ignored.
func factsForPrompt(facts map[string]string, order []string, text string, budget int) ([]shownFact, int) {
	if len(facts) == 0 {
		return nil, 0
	}
	rank := make(map[string]int, len(order))
	for i, k := range order {
		if _, dup := rank[k]; !dup {
			rank[k] = i
		}
	}
	turnWords := promptWords(text)
	type candidate struct {
		shownFact
		shared, rank int
	}
	cands := make([]candidate, 0, len(facts))
	for k, v := range facts {
		v = strings.TrimSpace(v)
		if k == "" || v == "" {
			continue
		}
		// Redacted like what a model returns: facts a frontend wrote
		// (facts.set, an import) are stored as sent, and the prompt is no
		// place for a secret they hold (docs/operations.md, "Sensitive
		// data"). A fact left with nothing but markers says nothing.
		var ok bool
		if v, _, ok = redact.Fact(k, v); !ok {
			continue
		}
		c := candidate{shownFact: shownFact{key: k, value: boundText(sanitize(v), promptMaxFactValueBytes)}, rank: len(order)}
		if r, ok := rank[k]; ok {
			c.rank = r
		}
		for w := range promptWords(strings.ReplaceAll(k, "_", " ") + " " + v) {
			if turnWords[w] {
				c.shared++
			}
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		switch {
		case a.shared != b.shared:
			return b.shared - a.shared
		case a.rank != b.rank:
			return a.rank - b.rank
		}
		return strings.Compare(a.key, b.key)
	})
	var shown []shownFact
	used := 0
	for _, c := range cands {
		// The line as writeBackground writes it: "key": "value",\n
		size := len(promptJSON(c.key)) + len(promptJSON(c.value)) + 4
		if used+size > budget {
			continue
		}
		used += size
		shown = append(shown, c.shownFact)
	}
	return shown, len(cands) - len(shown)
}

// promptWords returns the words of s that can tell what a fact is about:
// lowercased, at least three letters or digits, not a common function
// word, compared by their first five runes so that "allergic" matches
// "allergies" and "moved" matches "move".
func promptWords(s string) map[string]bool {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		r := []rune(w)
		if len(r) < 3 || stopWords[w] {
			continue
		}
		if len(r) > 5 {
			r = r[:5]
		}
		words[string(r)] = true
	}
	return words
}

// stopWords are common English words that say nothing about a fact.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and for you your are was were with that this have has had not but from they them
		what when where which who how can could would should will just about there their then than also very into out our
		all any some been being its don does did got get one now too yes okay thanks please`) {
		m[w] = true
	}
	return m
}()
