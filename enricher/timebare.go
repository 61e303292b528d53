package enricher

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Many people type these languages without their diacritics: on a
// keyboard without them, or on a phone whose autocorrect is off ("w
// zeszlym tygodniu", "la semaine derniere", "el ano pasado", "mes
// passado", "letzte Woche im Marz", "Maerz"; Russian "ещё" as "еще"). The
// word lists are written with them, and each word gains its bare forms
// (bareForms) where they are no other word of the language: Portuguese
// "é" (is) stays apart from "e" (and), Polish "że" from "ze". A word
// typed with its diacritics reads as before.

// bareForms are w's forms without its diacritics, other than w: its Latin
// letters' marks dropped, ł as l, ß as ss, æ and œ as ae and oe, and
// Cyrillic ё as е (й and other letters are kept). German adds the
// umlauts' usual transcription, ä as ae ("Maerz", "naechste").
func bareForms(w string, german bool) []string {
	plain := true
	for i := 0; i < len(w); i++ {
		if w[i] >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return nil
	}
	var out []string
	add := func(s string) {
		if s != w {
			for _, o := range out {
				if o == s {
					return
				}
			}
			out = append(out, s)
		}
	}
	add(bareOf(w, false))
	if german {
		add(bareOf(w, true))
	}
	return out
}

// bareOf is w without its diacritics; umlauts transcribes ä, ö and ü as
// ae, oe and ue.
func bareOf(w string, umlauts bool) string {
	var b strings.Builder
	for _, r := range norm.NFC.String(w) {
		switch {
		case umlauts && umlautLetters[r] != "":
			b.WriteString(umlautLetters[r])
		case bareLetters[r] != "":
			b.WriteString(bareLetters[r])
		case r >= 0xC0 && r < 0x250:
			// Latin-1 Supplement and Latin Extended-A and B: the letter
			// of the decomposition, its marks dropped.
			for _, d := range norm.NFD.String(string(r)) {
				if !unicode.Is(unicode.Mn, d) {
					b.WriteRune(d)
				}
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// bareLetters are the letters whose bare form is no decomposition;
// umlautLetters German's transcriptions.
var (
	bareLetters   = map[rune]string{'ł': "l", 'Ł': "L", 'ß': "ss", 'æ': "ae", 'Æ': "Ae", 'œ': "oe", 'Œ': "Oe", 'ё': "е", 'Ё': "Е"}
	umlautLetters = map[rune]string{'ä': "ae", 'ö': "oe", 'ü': "ue", 'Ä': "Ae", 'Ö': "Oe", 'Ü': "Ue"}
)

// withBare adds to m each key's bare forms (bareForms) with its value,
// unless taken says the form is another word (nil: unless m holds it).
func withBare[V any](m map[string]V, german bool, taken func(string) bool) map[string]V {
	var add []string
	for w := range m {
		add = append(add, w)
	}
	for _, w := range add {
		for _, b := range bareForms(w, german) {
			if _, ok := m[b]; ok || taken != nil && taken(b) {
				continue
			}
			m[b] = m[w]
		}
	}
	return m
}

// bareSet is withBare of a set of words of several languages.
func bareSet(m map[string]bool) map[string]bool { return withBare(m, true, nil) }

// withBare gives every word of l its bare forms (bareForms) that are no
// other word of l.
func (l *euLang) withBare() *euLang {
	words := map[string]bool{}
	sets := []map[string]bool{l.yearJoin, l.plans, l.notPlanAfter, l.rollNotBefore, l.past, l.habits, l.clauses,
		l.grammar, l.talk, l.greet, l.greetParts, l.asking}
	var slots []map[string]bool
	for _, e := range l.exprs {
		for _, s := range e.slots {
			if s.words != nil {
				slots = append(slots, s.words)
			}
		}
	}
	for _, s := range append(slices.Clone(sets), slots...) {
		for w := range s {
			words[w] = true
		}
	}
	for _, m := range []map[string]int{l.numbers, l.weekdays} {
		for w := range m {
			words[w] = true
		}
	}
	for w := range l.units {
		words[w] = true
	}
	for w := range l.months {
		words[w] = true
	}
	for _, c := range l.counts {
		for _, w := range c.words {
			words[w] = true
		}
	}
	// unsearched gets none: a bare form left out of every search is too
	// often another word ("uber" for "über", "passe" for "passé": a
	// review), where timeRest's grammar reads only beside a time.
	taken := func(b string) bool { return words[b] }
	german := l.code == "de"
	for _, s := range sets {
		withBare(s, german, taken)
	}
	for _, s := range slots {
		// A phrase's other words tell its bare forms apart: "ontem a
		// noite" is "ontem à noite", though "a" is also the article.
		withBare(s, german, nil)
	}
	withBare(l.numbers, german, taken)
	withBare(l.weekdays, german, taken)
	withBare(l.units, german, taken)
	withBare(l.months, german, taken)
	withBare(l.plurals, german, taken)
	withBare(l.dayParts, german, taken)
	for _, c := range l.counts {
		for _, w := range c.words {
			if len(bareForms(w, german)) > 0 {
				bare := make([]string, len(c.words))
				for k, w := range c.words {
					bare[k] = bareOf(w, false)
				}
				l.counts = append(l.counts, euCount{words: bare, n: c.n})
				break
			}
		}
	}
	return l
}

// bareLangSets is withBare of each language's set in m, keyed by language
// code.
func bareLangSets(m map[string]map[string]bool) map[string]map[string]bool {
	for code, set := range m {
		withBare(set, code == "de", nil)
	}
	return m
}
