package enricher

import (
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// CoreFactKeys are the facts enrich injects whatever the message is about,
// before the others (with all facts too): the keys of the fact vocabulary
// marked core (events.FactKeys: who the user is, what to call them, where
// and in what languages and time zone they live, and what they do) and
// their aliases, so that a fact stored under an alias before the vocabulary
// existed ("city", "language") is still core. Vocabulary order.
var CoreFactKeys = func() []string {
	var keys []string
	for _, k := range events.FactKeys() {
		if k.Core {
			keys = append(keys, k.Key)
			keys = append(keys, k.Aliases...)
		}
	}
	return keys
}()

var coreKeys = func() map[string]bool {
	m := make(map[string]bool, len(CoreFactKeys))
	for _, k := range CoreFactKeys {
		m[k] = true
	}
	return m
}()

// selectFacts chooses the facts an enrich injects from the user's facts
// (most recently set first): the core facts (CoreFactKeys) followed by the
// others relevant to the message, or with events.FactsAll by all the
// others, each part in the given order. A fact is relevant when a word of
// its key (split as Keywords splits words, so "_" and ":" separate, and
// CJK and South-East Asian runs into bigrams; in NFKC) or of its value
// matches one of the message's keywords, a trailing plural "s" or "es"
// aside, or when a keyword is one of its key's topics (keyTopics: food for
// allergies). Stop words of the fact never match, so a message made only
// of stop words (whose keywords fall back to all its words) selects no
// fact through them. The token budget is applied afterwards, so core
// facts are the last to be dropped.
func selectFacts(mode string, keywords []string, facts []store.Fact) []store.Fact {
	all := mode == events.FactsAll
	want := make(map[string]bool, len(keywords))
	for _, k := range keywords {
		want[stem(k)] = true
	}
	sea := seaBigrams(keywords)
	var core, rel []store.Fact
	for _, f := range facts {
		switch {
		case coreKeys[f.Key]:
			core = append(core, f)
		case all || matchesKey(want, sea, f.Key) || aboutTopic(want, f.Key) || matches(want, sea, f.Value):
			rel = append(rel, f)
		}
	}
	return append(core, rel...)
}

// keyTopics are words of a message about what a key of the vocabulary
// bears on, though they are neither its words nor its value's: food and
// health, age and birth, origin, marriage, family, work, study, driving,
// travel plans, and the requests for suggestions that likes and hobbies
// are kept for. "Any cake recipes for me?" shares no word with allergies =
// peanuts, "how old am I?" none with birth_year = 1990, "am I married?"
// none with partner = Sam. They are matched as the message's keywords are
// (plural aside), by a stored key or any alias. "from" is a stop word, so
// it is among a message's keywords only when all its words are ("where am
// I from?"), and selects hometown then alone. Selecting a fact costs a few
// tokens, and the token budget drops it first, so the lists lean to
// recall; words with common other senses in a chat that is also about
// code and tools are left out: "single", "date", "free", "drive" (Google
// Drive), "class", "major", "origin" (git), "native" (React Native),
// "parent", "job" (a cron job), "schedule", "office", "ideas" (a review
// found each selecting a fact for a question about code).
var keyTopics = func() map[string]map[string]bool {
	f := strings.Fields
	food := f(`food foods eat eating ate meal meals recipe recipes cook cooking cooked bake baking
		baked dish dishes dinner lunch breakfast brunch snack snacks dessert desserts cake cakes cookie cookies
		bread pizza pasta sandwich salad soup restaurant restaurants menu ingredient ingredients cuisine grocery
		groceries takeout drink drinks cocktail cocktails wine beer`)
	health := f(`doctor doctors medicine medicines medication medications prescription pill pills
		symptom symptoms treatment sick exercise exercises workout workouts training`)
	age := f(`age old older younger born birth birthdate`)
	origin := f(`from born grow grew grown raised childhood originally hometown`)
	marriage := f(`married marriage marry wedding anniversary engaged engagement divorced divorce dating spouse`)
	family := f(`family families parenting`)
	work := f(`boss colleague colleagues coworker coworkers career`)
	study := f(`study studies studied studying graduate graduated graduation exam exams`)
	drive := f(`driving drove parking mechanic`)
	travel := f(`trip trips travel travelling traveling vacation vacations holiday holidays upcoming
		weekend tonight tomorrow`)
	suggest := f(`recommend recommendation recommendations suggest suggestion suggestions gift gifts weekend fun`)
	topics := map[string][]string{
		"diet":                 food,
		"dietary_restrictions": food,
		"allergies":            append(slices.Clone(food), "medicine", "medicines", "medication", "medications", "prescription", "pill", "pills"),
		"health_conditions":    health,
		"birthday":             age,
		"birth_year":           age,
		"hometown":             origin,
		"relationship_status":  marriage,
		"partner":              append(slices.Clone(marriage), family...),
		"children":             family,
		"siblings":             family,
		"employer":             work,
		"education":            study,
		"car":                  drive,
		"plans":                travel,
		"likes":                suggest,
		"dislikes":             suggest,
		"hobbies":              suggest,
	}
	m := map[string]map[string]bool{}
	for key, words := range topics {
		set := map[string]bool{}
		for _, w := range words {
			set[stem(w)] = true
		}
		for _, n := range keyNames[key] {
			m[n] = set
		}
	}
	return m
}()

// aboutTopic reports whether a keyword (want, stemmed) is one of key's
// topics (keyTopics).
func aboutTopic(want map[string]bool, key string) bool {
	topics := keyTopics[key]
	for w := range want {
		if topics[w] {
			return true
		}
	}
	return false
}

// keyNames maps each key of the fact vocabulary (events.FactKeys) and
// each of its aliases to all of them: the words people ask about a fact
// with are often its aliases' ("am I allergic", allergic_to, for
// allergies; "my kids", "my wife", "college"), not the key's.
var keyNames = func() map[string][]string {
	m := map[string][]string{}
	for _, k := range events.FactKeys() {
		names := append([]string{k.Key}, k.Aliases...)
		for _, n := range names {
			m[n] = names
		}
	}
	return m
}()

// matchesKey reports whether a word of key matches want (see matches), or
// every word of another name of its vocabulary key (the key and its
// aliases) does: all of them, so that an alias of several words does not
// select its fact by a common one ("first" of first_language, "year" of
// year_of_birth, "time" of time_zone), while "allergic" (allergic_to, "to"
// being a stop word), "kids" or "wife" alone do.
func matchesKey(want, sea map[string]bool, key string) bool {
	if matches(want, sea, key) {
		return true
	}
	for _, n := range keyNames[key] {
		if n != key && matchesAll(want, n) {
			return true
		}
	}
	return false
}

// matchesAll reports whether name (a vocabulary alias: ASCII words) has a
// word other than stop words, and all of those are in want.
func matchesAll(want map[string]bool, name string) bool {
	any := false
	for w := range words(name) {
		if IsStopWord(w) {
			continue
		}
		if !want[stem(w)] {
			return false
		}
		any = true
	}
	return any
}

// matches reports whether a word of text, not a stop word, is in want. The
// text is put in NFKC first, as Keywords puts the message, so that a fact
// stored decomposed or full width matches a message typed composed or in
// ordinary width, and the reverse.
//
// A South-East Asian run of the fact matches by the bigrams of units of the
// message's pieces (sea, from seaBigrams), not the pieces themselves: a
// fact is a few words, often shorter than a message's three-unit piece
// around them ("กุ้ง" in "กุ้งแพงไหม", "แพ้กุ้ง" for "ฉันแพ้อะไรบ้าง"), and
// selecting a fact costs little; bigrams wholly of function words aside.
func matches(want, sea map[string]bool, text string) bool {
	if len(want) == 0 {
		return false
	}
	found := false
	for w := range words(norm.NFKC.String(text)) {
		if !hasUnspaced(w) {
			if !IsStopWord(w) && want[stem(w)] {
				return true
			}
			continue
		}
		// Split as Keywords splits the message (bigrams of CJK runs), so
		// that a fact "東京" matches a message about "東京の天気".
		cjkPieces(w, func(p cjkPiece) bool {
			if r, _ := utf8.DecodeRuneInString(p.tok); kindOf(r) != seaRun && !p.stop && !IsStopWord(p.tok) && want[stem(p.tok)] {
				found = true
			}
			return !found
		})
		segments(w, func(s segment) bool {
			if s.kind != seaRun || len(sea) == 0 {
				return !found
			}
			mask := seaFunctionMask(s.units)
			for i := range max(1, len(s.units)-1) {
				j := min(i+1, len(s.units)-1)
				if !(mask[i] && mask[j]) && sea[strings.Join(s.units[i:j+1], "")] {
					found = true
				}
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

// seaBigrams returns the bigrams of units (or the unit of a one-unit
// piece) of the South-East Asian pieces among keywords.
func seaBigrams(keywords []string) map[string]bool {
	var m map[string]bool
	for _, k := range keywords {
		segments(k, func(s segment) bool {
			if s.kind != seaRun {
				return true
			}
			if m == nil {
				m = map[string]bool{}
			}
			for i := range max(1, len(s.units)-1) {
				m[strings.Join(s.units[i:min(i+2, len(s.units))], "")] = true
			}
			return true
		})
	}
	return m
}

// stem is the form in which a fact's words and a message's keywords are
// compared: Latin accents folded as the index folds them (foldWord: "café"
// matches "cafe"), then an English plural ending dropped so that "dogs"
// matches "dog" and "allergies" matches "allergy": "ies" becomes "y", "es"
// after s, x, z, ch or sh is dropped, and a final "s" (not "ss") of a word
// longer than three bytes is dropped.
func stem(w string) string {
	w = foldWord(w)
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "es") && hasAnySuffix(w[:len(w)-2], "s", "x", "z", "ch", "sh"):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}
