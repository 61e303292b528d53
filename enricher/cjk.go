package enricher

import (
	"strings"
	"unicode/utf8"
)

// Some scripts are written without spaces between words: Chinese,
// Japanese and Korean (CJK; Korean spaces words but not their particles),
// and in South-East Asia Thai, Lao, Khmer and Myanmar (Burmese). Postgres'
// parser sees a whole sentence of them as one word, and a search for one
// of its words finds nothing. memoryd indexes a run of such text as
// overlapping bigrams: a CJK run "東京の天気" as 東京 京の の天 天気, and a
// run of one character as that character alone. In the South-East Asian
// scripts a unit is a letter with the combining marks (vowel signs, tone
// marks) that follow it, so "ข้าวผัด" is indexed as ข้า าว วผั ผัด: a
// bigram never splits a letter from its marks. The index side is the SQL
// function memoryd_cjk (migrations/020_languages.sql, and 048 for the
// South-East Asian scripts), applied to every user's items whatever their
// language. The query side is BigramTokens, which Keywords applies to the
// words of every message. The two must agree on which characters form runs:
// isCJK, isSEA and isSEAMark list the same ranges as the function's
// character classes, and TestBigramTokensMatchPostgres checks them against
// each other.
//
// A query word of several units becomes its bigrams, ORed with the other
// keywords like any keyword, so ranking scores an item by how many of them
// it holds; a query word of one unit finds the items where that unit stands
// alone (between other characters), not inside a longer run.

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

// seaRange is a range of code points, both ends included.
type seaRange struct{ lo, hi rune }

// seaLetters are the letters of Thai, Lao, Myanmar (with its extensions A
// and B) and Khmer, and seaMarks their combining marks (Unicode general
// category M), as Unicode 15 assigns them; digits, punctuation and symbols
// of those scripts are not listed and separate words. Fixed lists rather
// than Go's unicode tables, so that a newer Go cannot make the query side
// disagree with the index (migrations/048_sea_scripts.sql lists the same).
var (
	seaLetters = []seaRange{
		{0x0e01, 0x0e30}, {0x0e32, 0x0e33}, {0x0e40, 0x0e46}, // Thai
		{0x0e81, 0x0e82}, {0x0e84, 0x0e84}, {0x0e86, 0x0e8a}, {0x0e8c, 0x0ea3}, {0x0ea5, 0x0ea5}, // Lao
		{0x0ea7, 0x0eb0}, {0x0eb2, 0x0eb3}, {0x0ebd, 0x0ebd}, {0x0ec0, 0x0ec4}, {0x0ec6, 0x0ec6}, {0x0edc, 0x0edf},
		{0x1000, 0x102a}, {0x103f, 0x103f}, {0x1050, 0x1055}, {0x105a, 0x105d}, {0x1061, 0x1061}, // Myanmar
		{0x1065, 0x1066}, {0x106e, 0x1070}, {0x1075, 0x1081}, {0x108e, 0x108e},
		{0x1780, 0x17b3}, {0x17d7, 0x17d7}, {0x17dc, 0x17dc}, // Khmer
		{0xa9e0, 0xa9e4}, {0xa9e6, 0xa9ef}, {0xa9fa, 0xa9fe}, // Myanmar extended B
		{0xaa60, 0xaa76}, {0xaa7a, 0xaa7a}, {0xaa7e, 0xaa7f}, // Myanmar extended A
	}
	seaMarks = []seaRange{
		{0x0e31, 0x0e31}, {0x0e34, 0x0e3a}, {0x0e47, 0x0e4e}, // Thai
		{0x0eb1, 0x0eb1}, {0x0eb4, 0x0ebc}, {0x0ec8, 0x0ece}, // Lao
		{0x102b, 0x103e}, {0x1056, 0x1059}, {0x105e, 0x1060}, {0x1062, 0x1064}, {0x1067, 0x106d}, // Myanmar
		{0x1071, 0x1074}, {0x1082, 0x108d}, {0x108f, 0x108f}, {0x109a, 0x109d},
		{0x17b4, 0x17d3}, {0x17dd, 0x17dd}, // Khmer
		{0xa9e5, 0xa9e5}, {0xaa7b, 0xaa7d}, // Myanmar extended B, A
	}
)

func inRanges(r rune, rs []seaRange) bool {
	if r < 0x0e01 || r > 0xaa7f {
		return false
	}
	for _, x := range rs {
		if r >= x.lo && r <= x.hi {
			return true
		}
	}
	return false
}

// isSEA reports whether r is a letter or combining mark of Thai, Lao,
// Khmer or Myanmar: a character of a South-East Asian run.
func isSEA(r rune) bool { return inRanges(r, seaLetters) || inRanges(r, seaMarks) }

// isSEAMark reports whether r is a combining mark of those scripts: it
// belongs to the unit of the letter before it.
func isSEAMark(r rune) bool { return inRanges(r, seaMarks) }

// runKind is the kind of run a character belongs to.
type runKind uint8

const (
	noRun  runKind = iota // spaced text
	cjkRun                // a unit is a character
	seaRun                // a unit is a letter and its marks
)

func kindOf(r rune) runKind {
	switch {
	case isCJK(r):
		return cjkRun
	case isSEA(r):
		return seaRun
	}
	return noRun
}

// hasUnspaced reports whether s holds a character of a run (CJK or South-East Asian).
func hasUnspaced(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return kindOf(r) != noRun })
}

// isBigramToken reports whether s is a non-empty run of one kind's
// characters only: one of BigramTokens' bigrams or single units.
func isBigramToken(s string) bool {
	if s == "" {
		return false
	}
	var k runKind
	for i, r := range s {
		rk := kindOf(r)
		if rk == noRun || (i > 0 && rk != k) {
			return false
		}
		k = rk
	}
	return true
}

// segment is a piece of text: a run (kind cjkRun or seaRun) as its units,
// or the text between runs (noRun, one unit).
type segment struct {
	kind  runKind
	units []string
	start int // byte offsets in the text
	end   int
}

// segments calls yield with each segment of text in order, until it
// returns false. A run is a maximal stretch of characters of one kind. In
// a CJK run each character is a unit; in a South-East Asian run a unit is
// a letter and the marks after it, and marks that open a run (after other
// text: rare, a stray mark) form its first unit. units is reused between
// calls.
func segments(text string, yield func(segment) bool) bool {
	var units []string
	kind, start := noRun, 0
	emit := func(end int) bool {
		if end == start {
			return true
		}
		if kind == noRun {
			units = append(units[:0], text[start:end])
		}
		ok := yield(segment{kind, units, start, end})
		units = units[:0]
		return ok
	}
	unitStart := 0
	for i, r := range text {
		k := kindOf(r)
		if k != kind {
			if kind == seaRun && unitStart < i {
				units = append(units, text[unitStart:i])
			}
			if !emit(i) {
				return false
			}
			kind, start, unitStart = k, i, i
		}
		switch k {
		case cjkRun:
			units = append(units, text[i:i+utf8.RuneLen(r)])
		case seaRun:
			if i > unitStart && !isSEAMark(r) {
				units = append(units, text[unitStart:i])
				unitStart = i
			}
		}
	}
	if kind == seaRun && unitStart < len(text) {
		units = append(units, text[unitStart:])
	}
	return emit(len(text))
}

// BigramTokens splits text as memoryd indexes it: each run (see the top of
// this file) becomes its overlapping bigrams of units in order, or its one
// unit, and the text between runs is returned as it is, in order (so
// "東京でReactを勉強" gives 東京 京で React を勉 勉強). Text without runs is
// returned as its only element; "" gives none.
func BigramTokens(text string) []string {
	var out []string
	segments(text, func(s segment) bool {
		out = appendBigrams(out, s)
		return true
	})
	return out
}

// appendBigrams appends a segment's tokens: a run's bigrams or its one
// unit, or the text between runs.
func appendBigrams(out []string, s segment) []string {
	if len(s.units) == 1 {
		return append(out, s.units[0])
	}
	for i := 0; i+1 < len(s.units); i++ {
		out = append(out, s.units[i]+s.units[i+1])
	}
	return out
}
