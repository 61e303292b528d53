package enricher

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// foldWord is w with its Latin accents folded as the index folds text
// (migrations/058_fold_accents.sql, memoryd_fold): in its canonical
// decomposition (NFD), a combining mark (U+0300 to U+036F) on a Latin
// letter is dropped, unless its word holds a mark only Vietnamese writes
// (a horn, a dot below, a hook above, or two marks in a row: bạn, phở,
// mẹ keep theirs, their accents telling words apart); ø ł ı ß æ œ are
// mapped to o l i ss ae oe; and the result is composed again (NFC). So
// "pokémon" is "pokemon", "são" "sao", "straße" "strasse". Text without a
// Latin accent is returned as it is (ASCII with no work at all).
// TestFoldMatchesPostgres checks it against memoryd_fold.
func foldWord(w string) string {
	if isASCII(w) || !strings.ContainsFunc(w, foldable) {
		return w
	}
	d := []rune(norm.NFD.String(w))
	out := make([]rune, 0, len(d))
	for i := 0; i < len(d); {
		if !foldWordRune(d[i]) {
			out = append(out, d[i])
			i++
			continue
		}
		j := i
		vietnamese := false
		for ; j < len(d) && foldWordRune(d[j]); j++ {
			if isMark(d[j]) && (d[j] == 0x31b || d[j] == 0x323 || d[j] == 0x309 || (j > i && isMark(d[j-1]))) {
				vietnamese = true
			}
		}
		for k := i; k < j; k++ {
			if !vietnamese && isMark(d[k]) && k > 0 && isLatinLetter(d[k-1]) {
				continue
			}
			out = append(out, d[k])
		}
		i = j
	}
	return norm.NFC.String(foldLetters.Replace(string(out)))
}

// foldLetters maps the Latin letters without a decomposition that people
// type as ASCII letters, as memoryd_fold does. Not đ: Croatian writes it
// dj, and Vietnamese tells words apart by it.
var foldLetters = strings.NewReplacer("ø", "o", "Ø", "O", "ł", "l", "Ł", "L", "ı", "i",
	"ß", "ss", "ẞ", "SS", "æ", "ae", "Æ", "AE", "œ", "oe", "Œ", "OE")

// foldable reports whether r may fold: memoryd_fold's cheap filter
// (Latin-1 Supplement from À, Latin Extended-A and -B, combining marks,
// Latin Extended Additional).
func foldable(r rune) bool {
	return (r >= 0xc0 && r <= 0x24f) || isMark(r) || (r >= 0x1e00 && r <= 0x1eff)
}

// isMark reports whether r is a combining diacritical mark (U+0300 to
// U+036F), those memoryd_fold drops.
func isMark(r rune) bool { return r >= 0x300 && r <= 0x36f }

// isLatinLetter is memoryd_fold's Latin letter, a mark's base.
func isLatinLetter(r rune) bool {
	return (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (r >= 0xc0 && r <= 0x24f) || (r >= 0x1e00 && r <= 0x1eff)
}

// foldWordRune is a rune of memoryd_fold's word: a Latin letter, an ASCII
// digit or a combining mark.
func foldWordRune(r rune) bool {
	return isLatinLetter(r) || (r >= '0' && r <= '9') || isMark(r)
}
