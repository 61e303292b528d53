// Package factkey holds the spelling of fact keys shared by the model
// extractor and the MCP fact tools, so that a key an agent sets and the
// key extraction writes for the same words are one fact.
package factkey

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// latinFold spells the Latin letters that Unicode does not decompose into
// a base letter and marks.
var latinFold = map[rune]string{
	'ß': "ss", 'ẞ': "ss", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe",
	'ø': "o", 'Ø': "o", 'ł': "l", 'Ł': "l", 'đ': "d", 'Đ': "d", 'ð': "d", 'Ð': "d",
	'þ': "th", 'Þ': "th", 'ı': "i", 'ħ': "h", 'Ħ': "h",
}

// FoldLatin spells name's Latin letters without their accents ("café" is
// cafe, "größe" grosse) and its compatibility characters as their plain
// forms (a fullwidth "Ｎａｍｅ" is Name), what a writer without the keys
// would type. ok is false, and folded "", when name holds a letter or
// digit of another script: no ASCII spelling of it would be read as the
// same key.
func FoldLatin(name string) (folded string, ok bool) {
	var b strings.Builder
	for _, r := range norm.NFKD.String(name) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		if s, ok := latinFold[r]; ok {
			b.WriteString(s)
			continue
		}
		if r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return "", false
		}
		b.WriteRune(r)
	}
	return b.String(), true
}
