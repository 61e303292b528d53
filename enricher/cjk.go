package enricher

import "strings"

// CJK text (Chinese, Japanese, Korean) is written without spaces between
// words, so Postgres' parser sees a whole sentence as one word and a search
// for one of its words finds nothing. memoryd indexes such text as
// overlapping character bigrams: a run of CJK characters "東京の天気" is
// indexed as 東京 京の の天 天気, and a run of a single character as that
// character alone. The index side is the SQL function memoryd_cjk
// (migrations/020_languages.sql), applied to every user's items whatever
// their language. The query side is CJKTokens, which Keywords applies to
// the words of every message. The two must agree on which characters are
// CJK: isCJK and
// the function's character class list the same ranges, and
// TestCJKTokensMatchPostgres checks them against each other.
//
// A query word of several CJK characters becomes its bigrams, ORed with the
// other keywords like any keyword, so ranking scores an item by how many of
// them it holds; a query word of one character finds the items where that
// character stands alone (between non-CJK characters), not inside a longer
// run.

// isCJK reports whether r is a character memoryd bigrams: Han ideographs,
// Hiragana, Katakana (full and half width, with the prolonged sound mark),
// the ideographic iteration marks 々 and 〆, and Hangul. Punctuation of
// those scripts (、。・「」) and the voicing marks that are symbols
// (゛゜) are not, nor is 〇, which Go classes as a number letter and which
// Keywords' word splitting therefore treats as a separator.
func isCJK(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case r <= 0x11ff: // Hangul Jamo
		return true
	case r == 0x3005 || r == 0x3006: // 々 〆
		return true
	case r >= 0x3041 && r <= 0x309a: // Hiragana and the combining voicing marks
		return true
	case r >= 0x309d && r <= 0x309f: // Hiragana iteration marks, ゟ
		return true
	case r >= 0x30a1 && r <= 0x30fa: // Katakana letters
		return true
	case r >= 0x30fc && r <= 0x30ff: // ー, Katakana iteration marks, ヿ
		return true
	case r >= 0x3131 && r <= 0x318e: // Hangul compatibility Jamo
		return true
	case r >= 0x31f0 && r <= 0x31ff: // Katakana phonetic extensions
		return true
	case r >= 0x3400 && r <= 0x4dbf: // CJK extension A
		return true
	case r >= 0x4e00 && r <= 0x9fff: // CJK unified ideographs
		return true
	case r >= 0xa960 && r <= 0xa97f: // Hangul Jamo extended A
		return true
	case r >= 0xac00 && r <= 0xd7ff: // Hangul syllables, Jamo extended B
		return true
	case r >= 0xf900 && r <= 0xfaff: // CJK compatibility ideographs
		return true
	case r >= 0xff66 && r <= 0xff9f: // half-width Katakana
		return true
	case r >= 0xffa0 && r <= 0xffdc: // half-width Hangul
		return true
	case r >= 0x20000 && r <= 0x3fffd: // CJK extensions B and later
		return true
	}
	return false
}

// hasCJK reports whether s holds a CJK character.
func hasCJK(s string) bool {
	return strings.ContainsFunc(s, isCJK)
}

// isCJKToken reports whether s is a non-empty run of CJK characters only:
// one of CJKTokens' bigrams or unigrams.
func isCJKToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !isCJK(r) {
			return false
		}
	}
	return true
}

// CJKTokens splits text as memoryd indexes it: each run of CJK characters
// (see isCJK) becomes its overlapping bigrams in order, or the character
// itself when the run is one character long, and the text between runs is
// returned as it is, in order (so "東京でReactを勉強" gives 東京 京で React
// を勉 勉強). Text without CJK is returned as its only element; "" gives
// none.
func CJKTokens(text string) []string {
	var out []string
	var run []rune
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			out = append(out, string(run))
		default:
			for i := 0; i+1 < len(run); i++ {
				out = append(out, string(run[i:i+2]))
			}
		}
		run = run[:0]
	}
	start := -1 // start of the current non-CJK stretch
	for i, r := range text {
		if isCJK(r) {
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
			run = append(run, r)
			continue
		}
		flush()
		if start < 0 {
			start = i
		}
	}
	flush()
	if start >= 0 {
		out = append(out, text[start:])
	}
	return out
}
