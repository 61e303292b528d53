package enricher

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/store"
)

// stopWords are conversational words that say nothing about what to recall:
// articles, pronouns, prepositions, conjunctions, auxiliaries and modals,
// question words, contraction stems and fillers. Words of two characters or
// fewer are dropped before this list is consulted, so it holds none.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		the and but nor yet for not also than then too very
		you your yours yourself yourselves him his himself her hers herself its itself
		our ours ourselves they them their theirs themselves mine myself
		this that these those who whom whose which what whats whatever when where why how
		anyone anything someone something everyone everything nobody nothing
		about above across after against along among around before behind below beneath
		beside besides between beyond down during except from inside into near off onto out
		outside over past since through throughout till toward towards under until upon
		with within without via per because while whether though although unless
		can could may might must shall should will would cannot
		are was were been being have has had having does did doing done
		get gets got getting let lets
		don doesn didn isn aren wasn weren haven hasn hadn won wouldn shouldn couldn
		please thanks thank tell told know knew say said ask asked remember recall
		just really okay yes yeah yep hey hello well actually maybe any some all
		much more most again still now here there only own same such each few other
		both every either neither one ones something anyway basically literally
		hmm umm uhm lol want wanted
	`) {
		m[w] = true
	}
	return m
}()

// phatic are the words of a message that only greets, thanks or
// acknowledges ("thanks!", "ok, great", "hi there"): it asks nothing of
// memory, and searching its words would bring every turn that said them.
var phatic = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		thanks thank thx ty you very much so lot hi hey hello there bye goodbye see later
		ok okay yeah yep yup nope sure cool great awesome perfect cheers
		lol haha got it that welcome np
	`) {
		m[w] = true
	}
	return m
}()

// Keywords extracts the search keywords of a message: words (runs of
// letters, digits and combining marks; anything else separates words) in
// lower case, without words of two characters or fewer or stop words,
// deduplicated in order of first use. A word holding CJK characters is
// split by CJKTokens first: its CJK bigrams (or single characters) are
// keywords whatever their length, and its other parts are words like any.
// When that leaves nothing it falls back to every word of the message. A
// message that only greets, thanks or acknowledges (every word phatic: "ok,
// great, thanks!") has none. Invalid UTF-8 separates words like
// punctuation. At most store.MaxKeywords are returned, and words longer
// than store.MaxKeywordBytes are skipped; the result is never nil.
func Keywords(message string) []string {
	// Both lists hold at most store.MaxKeywords words: a scan finds a
	// repeat sooner than a map would be built (this runs on every enrich).
	kept, all := make([]string, 0, 8), make([]string, 0, 8)
	// add reports whether the keywords are complete.
	add := func(word string) bool {
		if len(word) > store.MaxKeywordBytes {
			return false
		}
		if len(all) < store.MaxKeywords && !slices.Contains(all, word) {
			all = append(all, word)
		}
		if IsStopWord(word) || slices.Contains(kept, word) {
			return false
		}
		kept = append(kept, word)
		return len(kept) == store.MaxKeywords
	}
words:
	for word := range words(message) {
		if !hasCJK(word) {
			if add(word) {
				break
			}
			continue
		}
		for _, tok := range CJKTokens(word) {
			if add(tok) {
				break words
			}
		}
	}
	if len(all) < store.MaxKeywords && onlyPhatic(all) {
		return kept[:0]
	}
	if len(kept) == 0 {
		return all
	}
	return kept
}

// onlyPhatic reports whether words greet, thank or acknowledge and say
// nothing else: one phatic word at least, and every other word of two
// characters or fewer ("ok", "it"; "that's" leaves "s"), none of them CJK.
func onlyPhatic(words []string) bool {
	greets := false
	for _, w := range words {
		switch {
		case phatic[w]:
			greets = true
		case utf8.RuneCountInString(w) > 2 || isCJKToken(w):
			return false
		}
	}
	return greets
}

// Words returns every word of text, lower-cased, in order, with repeats: the
// tokenisation Keywords uses (runs of letters, digits and combining marks),
// without its filtering. It is what the quality evaluation's baselines
// tokenise stored text with.
func Words(text string) []string {
	out := []string{}
	for w := range words(text) {
		out = append(out, w)
	}
	return out
}

// IsStopWord reports whether Keywords drops word (already lower-cased): a
// word of two characters or fewer, or a conversational stop word; never a
// CJK token (a bigram or single character of CJKTokens).
func IsStopWord(word string) bool {
	if isCJKToken(word) {
		return false // a CJK bigram or single character (see CJKTokens)
	}
	return utf8.RuneCountInString(word) <= 2 || stopWords[word]
}

// words yields the lower-cased words of s.
func words(s string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		start := -1
		for i := 0; i <= len(s); {
			var inWord bool
			size := 1
			switch {
			case i == len(s):
			case s[i] < utf8.RuneSelf: // ASCII: no decoding
				c := s[i] | 0x20
				inWord = (c >= 'a' && c <= 'z') || (s[i] >= '0' && s[i] <= '9')
			default:
				var r rune
				r, size = utf8.DecodeRuneInString(s[i:])
				// RuneError with size 1 is invalid UTF-8: a separator. A
				// literal U+FFFD (size 3) is not a letter either.
				inWord = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
			}
			switch {
			case inWord && start < 0:
				start = i
			case !inWord && start >= 0:
				if !yield(strings.ToLower(s[start:i])) {
					return
				}
				start = -1
			}
			if i == len(s) {
				break
			}
			i += size
		}
	}
}
