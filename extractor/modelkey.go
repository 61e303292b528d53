package extractor

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memoryd/memoryd/events"
)

// droppedKey is a fact key of a model's reply that was dropped as unusable,
// as the model wrote it, and why.
type droppedKey struct {
	key, why string
}

// Why a model's fact key is dropped (modelKey).
const (
	whyNotLatin = "letters outside the Latin alphabet (keys are English snake_case)"
	whyNoWords  = "no letters or digits"
)

// latinFold spells the Latin letters that Unicode does not decompose into
// a base letter and marks.
var latinFold = map[rune]string{
	'ß': "ss", 'ẞ': "ss", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe",
	'ø': "o", 'Ø': "o", 'ł': "l", 'Ł': "l", 'đ': "d", 'Đ': "d", 'ð': "d", 'Ð': "d",
	'þ': "th", 'Þ': "th", 'ı': "i", 'ħ': "h", 'Ħ': "h",
}

// modelKey returns the snake_case key (events.SnakeKey) a model's fact key
// names, or "" and why it is dropped. Keys are snake_case ASCII, and the
// prompt asks for English ones; a model that writes its key in the user's
// language must not have it mangled (SnakeKey makes every other letter a
// separator: "größe" was "gr_e", "café_préféré" "caf_pr_f_r"). So a Latin
// letter with an accent is spelled without it ("café_préféré" is
// cafe_prefere, "größe" grosse: what a writer without the keys would type),
// and a key holding a letter or digit of another script ("年齢", "user_年齢")
// is dropped whole: no spelling of it in ASCII would be read as the same
// key, and a part of it ("user") would be another fact.
func modelKey(name string) (key, why string) {
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
			return "", whyNotLatin
		}
		b.WriteRune(r)
	}
	if key = events.SnakeKey(b.String()); key == "" {
		return "", whyNoWords
	}
	return key, ""
}
