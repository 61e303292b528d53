package extractor

import (
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The words, value cleaning and date parsing of the rules extractor
// (rules.go).

// isHypotheticalWord reports whether w, right before a statement, makes it a
// hypothetical, reported or negated one rather than a statement of fact.
func isHypotheticalWord(w string) bool {
	switch w {
	case "if", "what", "whether", "suppose", "imagine", "pretend", "say", "says", "said", "unless", "assume", "assuming", "as",
		"not", "never", "don't", "don’t", "dont", "doesn't", "doesn’t", "didn't", "didn’t", "won't", "won’t", "can't", "can’t",
		"cannot", "shouldn't", "wouldn't", "no":
		return true
	}
	return false
}

// The isBadLead functions report whether w is an implausible first word of a
// value, for any kind and per kind.
func isBadLeadCommon(w string) bool {
	switch w {
	case "no", "never", "nothing", "none", "unknown", "what", "which", "whatever", "whoever", "where", "who":
		return true
	}
	return false
}

func isBadLeadName(w string) bool {
	switch w {
	case "not", "a", "an", "the", "on", "in", "at", "also", "still", "pronounced", "spelled", "spelt", "is", "was", "that", "this", "it", "too", "so", "very", "hard", "long", "weird", "difficult",
		"after", "by", "for", "from", "like", "her", "his", "their", "our", "my", "your", "just", "simply", "only":
		return true
	}
	return false
}

func isBadLeadCallMe(w string) bool {
	switch w {
	case "not", "a", "an", "the", "back", "later", "tomorrow", "today", "tonight", "now", "when", "whenever", "if", "anytime", "sometime", "maybe", "crazy", "old", "old-fashioned", "by", "after", "before", "soon", "again", "asap", "please", "at", "on", "in", "up", "out", "over", "to", "you", "him", "her", "them", "me", "us", "it", "this", "that", "whatever", "any", "anything", "something", "once", "first", "next":
		return true
	}
	return false
}

func isBadLeadPlace(w string) bool {
	switch w {
	case "a", "an", "not", "here", "there", "this", "that", "it", "home", "fear", "hope", "peace", "my", "your", "his", "her", "their", "our", "another", "some":
		return true
	}
	return false
}

func isBadLeadEmployer(w string) bool {
	switch w {
	case "a", "an", "not", "night", "nights", "home", "weekends", "least", "most", "hours", "money", "free", "fun", "myself", "yourself", "me", "you", "him", "her", "them", "us", "it", "this", "that", "now", "some", "another", "my", "your", "his", "their", "our":
		return true
	}
	return false
}

func isBadLeadPlain(w string) bool {
	switch w {
	// "I prefer something less sad this time": a reply to what came
	// before, no standing preference.
	case "not", "that", "it", "this", "something", "anything", "nothing", "one", "ones", "those", "these", "them":
		return true
	}
	return false
}

// isTailCommon reports whether w ends any value: what follows starts
// another clause.
func isTailCommon(w string) bool {
	switch w {
	case "but", "because", "cause", "'cause", "’cause", "cuz", "coz", "since", "although", "though", "so", "which", "who", "whom", "whose", "where", "when", "while", "if", "unless", "whereas", "btw", "lol", "haha", "tho", "thanks", "thank", "please":
		return true
	}
	return false
}

// isTailPlace adds, for places, words that start a temporal or circumstantial
// tail:
// "I live in Berlin with my wife", "I moved to Lisbon last year".
func isTailPlace(w string) bool {
	switch w {
	case "with", "for", "in", "at", "near", "since", "last", "next", "this", "right", "now", "nowadays", "currently", "recently", "ago", "yesterday", "today", "tomorrow", "these", "as", "after", "before", "until", "during", "from", "to", "originally":
		return true
	}
	return false
}

// isTailEmployer is like isTailPlace without "for" and "at", which are
// common inside organisation names ("Center for ...").
func isTailEmployer(w string) bool {
	switch w {
	case "as", "in", "near", "since", "now", "nowadays", "currently", "recently", "ago", "with", "last", "these", "during", "until", "part-time", "full-time", "remotely", "from":
		return true
	}
	return false
}

// isClauseStarter reports whether w, after "and", begins a new clause ("Ana
// and I live ..."); any other word keeps "and" inside the value ("fish and
// chips").
func isClauseStarter(w string) bool {
	switch w {
	case "i", "i'm", "i’m", "im", "i've", "i’ve", "i'd", "i’d", "i'll", "i’ll", "my", "me", "we", "we're", "our", "you", "your", "he", "she", "they", "it", "it's", "its", "that", "then", "also", "work", "live", "moved", "am", "have", "has", "had", "love", "like", "prefer", "hate", "was", "will", "would", "can", "currently", "recently", "now", "so", "this", "there", "here", "what", "how":
		return true
	}
	return false
}

// isTrailingFiller reports whether w is dropped from the end of a value:
// "Ana too".
func isTrailingFiller(w string) bool {
	switch w {
	case "too", "btw", "lol", "haha", "though", "tho", "actually", "anyway", "now", "here", "there", "ok", "okay", "please", "thanks":
		return true
	}
	return false
}

// isLeadingFiller reports whether w is dropped from the start of a value:
// "actually Ana".
func isLeadingFiller(w string) bool {
	switch w {
	case "actually", "really", "just", "literally", "basically", "currently", "now", "officially", "especially", "particularly":
		return true
	}
	return false
}

var (
	// durationTailRE finds a tail that needs more than one word to recognise:
	// "I moved to Lisbon 3 years ago".
	durationTailRE = regexp.MustCompile(`(?i)\s+(?:about\s+|around\s+|almost\s+|over\s+)?(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|a\s+couple\s+of|several)\s+(?:days?|weeks?|months?|years?|decades?)\b`)
	// emailRE is a plausibility check, not validation.
	emailRE = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
)

// isLookbackMarker reports whether w, among the few words before a statement
// in its clause, makes it hypothetical, reported, quoted or hedged: "if I
// ever live in Paris", "she said I live in Rome", "I think I'm allergic".
func isLookbackMarker(w string) bool {
	switch w {
	case "if", "imagine", "imagining", "pretend", "pretending", "suppose", "supposing", "unless", "whether", "assume", "assuming",
		"wish", "say", "says", "said", "saying", "tell", "told", "tells", "ask", "asked", "asks", "wrote", "writes", "claim", "claims",
		"claimed", "think", "thinks", "thought", "maybe", "perhaps", "lets", "let's", "let’s", "hypothetically", "roleplay",
		"role-play", "character", "story", "novel", "fiction", "game", "scene", "where", "would", "could", "might":
		return true
	}
	return false
}

// isNegation reports whether w, a few words before a statement in its
// clause, negates it: "I don't want you to call me Bob".
func isNegation(w string) bool {
	switch w {
	case "not", "never", "don't", "don’t", "dont", "doesn't", "doesn’t", "didn't", "didn’t", "won't", "won’t", "can't", "can’t",
		"cannot", "shouldn't", "shouldn’t", "wouldn't", "wouldn’t", "isn't", "isn’t", "wasn't", "wasn’t", "nobody", "noone":
		return true
	}
	return false
}

func isBadLeadThing(w string) bool {
	switch w {
	case "not", "it", "it's", "it’s", "that", "this", "these", "those", "you", "him", "her", "them", "us", "me", "your", "his", "their",
		"our", "my", "how", "when", "what", "where", "why", "who", "whether", "if", "to", "being", "a", "an", "about", "most", "all",
		"both", "some", "so", "too", "very", "much", "lots", "more", "less", "anything", "everything", "something", "stuff", "any",
		"and", "or", "but", "with", "for", "at", "on", "in", "of", "along", "around", "up", "out", "by", "as", "here", "there", "u", "ya":
		return true
	}
	return false
}

// isAdverbLead reports whether w, a lowercase first word of a thing liked,
// makes it a manner or a clause rather than a thing: "I like better", "I
// love always being ...", "I like maybe we can ...". A capitalised one is a
// name ("Best Buy", "Only Murders in the Building").
func isAdverbLead(w string) bool {
	switch w {
	case "better", "best", "always", "never", "often", "sometimes", "usually", "still", "even", "only", "again", "ever":
		return true
	}
	return false
}

// isClauseLead reports whether w, a lowercase first word of a thing, starts
// a clause rather than a thing: "maybe we can ...", "that's what ...".
func isClauseLead(w string) bool {
	switch w {
	case "maybe", "perhaps", "that's", "that’s", "what's", "what’s":
		return true
	}
	return false
}

// isGoalFiller reports whether w is dropped from the start of a goal, with
// a "to" after it: "my goal is always to help", "... to only eat ...".
func isGoalFiller(w string) bool {
	switch w {
	case "always", "still", "only", "even", "ever", "simply", "really", "just":
		return true
	}
	return false
}

// isTailThing adds, for items of a list, words that start a circumstance:
// "cooking for my family", "hiking with friends".
func isTailThing(w string) bool {
	switch w {
	case "with", "for", "when", "whenever", "every", "during", "on", "at", "in", "nowadays", "lately", "these", "since", "from", "to", "as", "like",
		"after", "before", "until", "till", "due":
		return true
	}
	return false
}

// isVerbTail reports whether w, inside a thing liked, is a verb that makes
// what follows a predicate about it: "noodles sounds amazing", "spicy food
// and shrimp is my favorite protein", "store-bought ones can be".
func isVerbTail(w string) bool {
	// As written: "Good Will Hunting" is a title.
	switch w {
	case "is", "are", "was", "were", "sounds", "sound", "seems", "seem", "looks", "can", "could", "would", "will", "might", "makes", "adds":
		return true
	}
	return false
}

// isGenericPlace reports whether words are a kind of place rather than
// one: "the city", "the area", "the same building"; not "the City", "the
// south of France", "the West Midlands".
func isGenericPlace(words []string) bool {
	if len(words) < 2 || normWord(words[0]) != "the" {
		return false
	}
	if normWord(words[1]) == "same" || normWord(words[1]) == "other" {
		return true // "the same building", "the other side"
	}
	if len(words) != 2 || words[1] != strings.ToLower(words[1]) {
		return false
	}
	switch normWord(words[1]) {
	case "city", "suburbs", "suburb", "burbs", "area", "countryside", "country", "neighborhood", "neighbourhood", "village", "town",
		"mountains", "woods", "forest", "outskirts", "sticks", "middle", "center", "centre", "north", "south", "east", "west":
		return true
	}
	return false
}

// isChoiceNoun reports whether w names one of the choices a reply offered:
// "the second one", "the third option".
func isChoiceNoun(w string) bool {
	switch w {
	case "one", "ones", "option", "options", "idea", "ideas", "suggestion", "suggestions", "recommendation", "recommendations", "choice", "choices":
		return true
	}
	return false
}

// isObjectPronoun reports whether w stands for something said before.
func isObjectPronoun(w string) bool {
	switch w {
	case "it", "them", "this", "that", "these", "those":
		return true
	}
	return false
}

// isThingLike reports whether words can be a thing the user likes, does or
// is allergic to: not about the one they are talking to ("the way you
// think"), nor a manner ("the idea of ..."), nor one of the choices a reply
// offered ("the third option", "the suggestions").
func isThingLike(words []string) bool {
	for _, w := range words {
		switch normWord(w) {
		case "you", "your", "yours", "you're", "you’re", "u":
			return false
		}
	}
	if len(words) > 1 && normWord(words[0]) == "the" && words[1] == strings.ToLower(words[1]) {
		// As written: "The Last of Us" is a title.
		switch normWord(words[1]) {
		case "ideas", "idea", "option", "options", "suggestion", "suggestions", "recommendation", "recommendations":
			if len(words) == 2 {
				return false // "the suggestions"
			}
		case "first", "second", "third", "fourth", "fifth", "last", "latter", "former", "previous", "above", "following", "next", "other":
			// "the third option", "the latter", not "the first snow".
			if len(words) == 2 || isChoiceNoun(normWord(words[2])) {
				return false
			}
		}
	}
	if len(words) > 1 && normWord(words[0]) == "the" {
		switch normWord(words[1]) {
		case "way", "idea", "fact", "sound", "look", "feeling", "thought", "one", "ones", "same", "rest", "most", "moment":
			return false
		}
	}
	return true
}

// isLanguageFiller reports whether w is dropped around a language: "a
// little French", "fluent German", "Spanish well".
func isLanguageFiller(w string) bool {
	switch w {
	case "a", "little", "bit", "of", "some", "basic", "fluent", "conversational", "decent", "good", "native", "also", "fluently",
		"well", "natively", "too", "perfect", "perfectly", "broken", "pretty", "very", "quite", "at", "home", "bits":
		return true
	}
	return false
}

func isBadLeadCar(w string) bool {
	switch w {
	case "lot", "bit", "little", "few", "couple", "long", "hour", "hours", "minute", "minutes", "mile", "miles", "while", "not", "ton", "stick", "manual", "automatic":
		return true
	}
	return false
}

// listValues returns the items of a list value at the start of sentence
// (which runs on over commas, to the end of the sentence): "peanuts,
// shellfish and eggs" is three items. The list ends where a new clause
// starts ("peanuts, but I ...", "peanuts and I live ...") and at the first
// item that is not plausible for kind.
func listValues(kind ruleKind, mode listMode, sentence string, ts time.Time) []string {
	if i := strings.IndexAny(sentence, ".;!?\n\r"); i >= 0 {
		// A '.' inside a word ("Node.js") or after "St" does not end the
		// sentence.
		for i >= 0 && sentence[i] == '.' && !sentenceDot(sentence, i) {
			j := strings.IndexAny(sentence[i+1:], ".;!?\n\r")
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i >= 0 {
			if sentence[i] == '.' && initialismEndRE.MatchString(sentence[max(0, i-rulesLeadBytes):i+1]) {
				i++ // "D.C.": the dot is the short form's
			}
			sentence = sentence[:i]
		}
	}
	words := strings.Fields(strings.ReplaceAll(sentence, ",", " , "))
	var items, cur []string
	comma := false
	flush := func() bool {
		v := cleanValue(kind, strings.Join(cur, " "), ts)
		cur = cur[:0]
		if v == "" {
			return false
		}
		items = append(items, v)
		return true
	}
	for i, w := range words {
		nw := normWord(w)
		next := ""
		if i+1 < len(words) {
			next = normWord(words[i+1])
		}
		and := nw == "and" || nw == "&" || nw == "or"
		if w == "," || and {
			if next == "" || isClauseStarter(next) || isTailCommon(next) || (w == "," && (next == "and" || next == "&") && i+2 < len(words) && isClauseStarter(normWord(words[i+2]))) {
				break // a new clause: "peanuts, but ..."
			}
			if kind == kindLiked && w == "," && isVerbTail(next) {
				break // a clause without its subject: "cooking, sounds fun"
			}
		}
		if w == "," || (and && (mode == listItemsAnd || comma)) {
			comma = comma || w == ","
			if len(cur) > 0 && !flush() {
				return items
			}
			continue
		}
		if len(cur) > 0 && isTailCommon(nw) {
			break
		}
		cur = append(cur, w)
	}
	if len(cur) > 0 {
		flush()
	}
	return items
}

// cleanValue cuts the value that starts at the beginning of rest down to the
// statement's value, and returns "" if it is not plausible for kind.
func cleanValue(kind ruleKind, rest string, ts time.Time) string {
	// Only the start of the clause can hold a value short enough to keep;
	// looking no further keeps many statements in one clause linear.
	rest, _ = truncateUTF8(rest, rulesValueScanBytes)
	if kind == kindEmail {
		return emailValue(rest)
	}

	// Cut at separators that never belong to a value, and at an emoji or
	// another pictograph: chat messages end in them ("I live in Braga 😊"
	// stored nothing, "I work as a nurse 🙂" the emoji with the job).
	for _, sep := range []string{" (", " [", " - ", " – ", " — ", `"`, "“", "”", ":)", ":-)", "..."} {
		if i := strings.Index(rest, sep); i >= 0 {
			rest = rest[:i]
		}
	}
	// One before the value is passed over ("I live in 🇵🇹 Lisbon").
	rest = strings.TrimLeftFunc(rest, func(r rune) bool { return isPictograph(r) || unicode.IsSpace(r) })
	if i := strings.IndexFunc(rest, isPictograph); i >= 0 {
		rest = rest[:i]
	}
	if loc := anymoreRE.FindStringIndex(rest); loc != nil {
		rest = rest[:loc[0]]
	}
	if kind == kindPlace || kind == kindEmployer || kind == kindThing || kind == kindLiked || kind == kindCar {
		if loc := durationTailRE.FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]]
		}
	}
	if kind == kindThing || kind == kindLiked {
		if loc := muchTailRE.FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]]
		}
	}
	if kind == kindBirthday {
		return birthdayValue(strings.TrimSpace(rest), ts)
	}

	words := strings.Fields(rest)
	for len(words) > 0 && isLeadingFiller(normWord(words[0])) {
		words = words[1:]
	}
	if kind == kindThing && len(words) > 1 && isGoalFiller(normWord(words[0])) {
		words = words[1:]
		if normWord(words[0]) == "to" {
			words = words[1:]
		}
	}
	if kind == kindLanguage {
		for len(words) > 0 && isLanguageFiller(normWord(words[0])) {
			words = words[1:]
		}
	}
	words = cutAtTail(kind, words)
	if kind == kindLiked && len(words) >= 2 && isObjectPronoun(normWord(words[len(words)-1])) &&
		strings.HasSuffix(normWord(words[len(words)-2]), "ing") {
		// "using it (in smoothies)": what is liked is the pronoun's
		// antecedent, said before; "using" alone is no thing liked.
		return ""
	}
	for len(words) > 0 && (isTrailingFiller(normWord(words[len(words)-1])) ||
		kind == kindLanguage && isLanguageFiller(normWord(words[len(words)-1])) ||
		kind == kindLiked && isTrailingLiked(words)) {
		words = words[:len(words)-1]
	}
	if len(words) == 0 {
		return ""
	}

	first := normWord(words[0])
	if isBadLeadCommon(first) {
		return ""
	}
	switch kind {
	case kindName, kindCallMe:
		if len(words) > rulesMaxNameWords || !isNameLike(words) {
			return ""
		}
		if isBadLeadName(first) || (kind == kindCallMe && isBadLeadCallMe(first)) {
			return ""
		}
	case kindPlace:
		if isBadLeadPlace(first) || isGenericPlace(words) || !isPlaceLike(words) {
			return ""
		}
	case kindEmployer:
		if isBadLeadEmployer(first) {
			return ""
		}
	case kindOccupation, kindPlain, kindShort:
		if isBadLeadPlain(first) {
			return ""
		}
	case kindThing:
		if len(words) > rulesMaxItemWords || isBadLeadThing(first) || !isThingLike(words) ||
			(isClauseLead(first) && words[0] == strings.ToLower(words[0])) ||
			(len(words) == 1 && (first == "the" || isNumber(first) && len(first) <= 2)) {
			return ""
		}
	case kindLiked:
		// A lone article is a list cut by a filler ("the, um, mountains"),
		// a small number a reply to a question ("I like 3").
		if len(words) > rulesMaxItemWords || isBadLeadThing(first) || !isThingLike(words) ||
			((isAdverbLead(first) && (len(words) == 1 || verbish(normWord(words[1]))) || isClauseLead(first) || first == "keep") && words[0] == strings.ToLower(words[0])) ||
			(len(words) == 1 && (first == "the" || isNumber(first) && len(first) <= 2)) || !isStandingLike(words) {
			return ""
		}
	case kindLanguage:
		// "French", "Brazilian Portuguese"; not "to my boss", "slowly".
		if len(words) > 2 || !isNameLike(words) || isBadLeadThing(first) || strings.HasSuffix(normWord(words[len(words)-1]), "ly") ||
			!isLanguageName(words) {
			return ""
		}
	case kindCar:
		if len(words) > 5 || isBadLeadCar(first) || isBadLeadThing(first) {
			return ""
		}
	}
	if kind == kindShort && len(words) > 4 {
		return ""
	}

	value := trimValue(strings.Join(words, " "))
	if isUnknownValue(strings.ToLower(value)) || utf8.RuneCountInString(value) > rulesMaxValueRunes {
		return ""
	}
	return value
}

// muchTailRE finds an intensifier after a liked thing: "cats a lot".
var muchTailRE = regexp.MustCompile(`(?i)\s+(?:a\s+lot|very\s+much|so\s+much|too\s+much|the\s+most|a\s+bit)\b`)

// isHypothetical reports whether the text of the clause before a statement
// makes it something other than the user's statement of fact: a negation or
// hypothetical right before it ("don't call me", "if my name is"), a
// hypothetical, reported, hedged or negated clause a few words before it
// ("if I ever live in", "she told me I'm", "I don't want you to call me"),
// or an open quote ("she said 'I live in Rome'"). It looks at a bounded
// number of words, so that many statements in one long clause cost linear
// time.
func isHypothetical(before string) bool {
	before = strings.TrimRightFunc(before, unicode.IsSpace)
	if r, _ := utf8.DecodeLastRuneInString(before); strings.ContainsRune(`"'“‘«`, r) {
		return true
	}
	for i := 0; i < rulesLookbackWords && before != ""; i++ {
		j := strings.LastIndexFunc(before, unicode.IsSpace)
		w := normWord(before[j+1:])
		if i == 0 && isHypotheticalWord(w) || isLookbackMarker(w) || isNegation(w) {
			return true
		}
		if strings.ContainsAny(before[j+1:], `"“”`) {
			return true // a quote opens or closes between: quoted or reported
		}
		before = strings.TrimRightFunc(before[:max(j, 0)], unicode.IsSpace)
	}
	return false
}

// birthdayValue returns a birthday as YYYY-MM-DD or MM-DD: "today" and
// "tomorrow" anchored to the turn's own date, "March 3rd", "3rd of March
// 1990", "March 3, 1990" or "1990-03-03". Anything else (relative dates,
// "in March") is not a birthday it can store.
func birthdayValue(v string, ts time.Time) string {
	v = strings.ToLower(v)
	for _, w := range []string{"today", "tomorrow"} {
		if v == w || strings.HasPrefix(v, w+" ") || strings.HasPrefix(v, w+"!") {
			if ts.IsZero() {
				return ""
			}
			d := ts
			if w == "tomorrow" {
				d = ts.AddDate(0, 0, 1)
			}
			return d.Format("01-02")
		}
	}
	var year, month, day int
	if m := isoDateRE.FindStringSubmatch(v); m != nil {
		year, _ = strconv.Atoi(m[1])
		month, _ = strconv.Atoi(m[2])
		day, _ = strconv.Atoi(m[3])
	} else if m := dayMonthRE.FindStringSubmatch(v); m != nil {
		day, _ = strconv.Atoi(m[1])
		month = monthNumber(m[2])
		year, _ = strconv.Atoi(m[3])
	} else if m := monthDayRE.FindStringSubmatch(v); m != nil {
		month = monthNumber(m[1])
		day, _ = strconv.Atoi(m[2])
		year, _ = strconv.Atoi(m[3])
	} else {
		return ""
	}
	maxYear := 2100
	if !ts.IsZero() {
		maxYear = ts.Year()
	}
	if month < 1 || month > 12 || day < 1 || (year != 0 && (year < 1900 || year > maxYear)) {
		return ""
	}
	check := year
	if check == 0 {
		check = 2000 // a leap year: 02-29 is a birthday
	}
	if time.Date(check, time.Month(month), day, 0, 0, 0, 0, time.UTC).Day() != day {
		return ""
	}
	if year == 0 {
		return strconv.Itoa(month/10) + strconv.Itoa(month%10) + "-" + strconv.Itoa(day/10) + strconv.Itoa(day%10)
	}
	return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
}

// birthdayMonthDay returns the month and day of a birthday value
// (YYYY-MM-DD or MM-DD), or zeros.
func birthdayMonthDay(v string) (month, day int) {
	if len(v) == len("2006-01-02") {
		v = v[5:]
	}
	if len(v) != len("01-02") || v[2] != '-' {
		return 0, 0
	}
	month, err1 := strconv.Atoi(v[:2])
	day, err2 := strconv.Atoi(v[3:])
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return month, day
}

const monthNames = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?`

var (
	isoDateRE  = regexp.MustCompile(`^((?:19|20)\d\d)-(\d\d?)-(\d\d?)\b`)
	dayMonthRE = regexp.MustCompile(`^(?:the\s+)?(\d\d?)(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthNames + `(?:,?\s+((?:19|20)\d\d))?\b`)
	monthDayRE = regexp.MustCompile(`^` + monthNames + `\s+(?:the\s+)?(\d\d?)(?:st|nd|rd|th)?(?:,?\s+((?:19|20)\d\d))?\b`)
)

func monthNumber(name string) int {
	name = strings.TrimSuffix(name, ".")
	for i, m := range []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"} {
		if strings.HasPrefix(name, m) {
			return i + 1
		}
	}
	return 0
}

// sentenceDot reports whether the '.' at text[i] ends a sentence: it is
// followed by space or the end, and it does not end a title or a short
// form of a place's word before a name ("St. Louis", "Mt. Pleasant", "Dr.
// Silva"), which would leave "St" as the user's city.
func sentenceDot(text string, i int) bool {
	if i+1 < len(text) && !isSpaceByte(text[i+1]) {
		return false // "Node.js", "ana@example.com"
	}
	j := i
	for j > 0 && isASCIILetter(text[j-1]) {
		j--
	}
	if j == i || j > 0 && !isSpaceByte(text[j-1]) && text[j-1] != '(' || text[j] < 'A' || text[j] > 'Z' || !nameAbbrevs[strings.ToLower(text[j:i])] {
		return true
	}
	if postNominals[strings.ToLower(text[j:i])] {
		// "John Smith Jr.": after a name's word, the name's end.
		p := j - 1
		for p > 0 && isSpaceByte(text[p-1]) {
			p--
		}
		q := p
		for q > 0 && isASCIILetter(text[q-1]) {
			q--
		}
		if q < p && text[q] >= 'A' && text[q] <= 'Z' {
			return true
		}
	}
	k := i + 1
	for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
		k++
	}
	if text[k:] == "I" || strings.HasPrefix(text[k:], "I ") || strings.HasPrefix(text[k:], "I'") || strings.HasPrefix(text[k:], "I’") {
		return true // "Dr. I live in Porto": no name is "I"
	}
	r, _ := utf8.DecodeRuneInString(text[k:])
	return !unicode.IsUpper(r)
}

// postNominals are the short forms of nameAbbrevs also written after a
// name ("John Smith Jr."), where their dot may end the sentence.
var postNominals = map[string]bool{"jr": true, "sr": true}

// nameAbbrevs are the short forms, written before a name with a dot, of
// titles and of the words of places' names.
var nameAbbrevs = map[string]bool{
	"st": true, "ste": true, "mt": true, "ft": true, "pt": true, "sta": true, "sto": true,
	"dr": true, "mr": true, "mrs": true, "ms": true, "mx": true, "prof": true, "rev": true, "fr": true, "sr": true, "jr": true,
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// forEachSegment calls fn for every clause of text that is not a question.
// Clauses end at , ; ! ? and line breaks, and at a '.' that ends a sentence
// (sentenceDot: followed by space or the end, not after "St"), so that
// "ana@example.com", "Acme Inc" and "St. Louis" stay whole. A clause ending in '?' is a question and is skipped, so "I'm
// from Lisbon, where do you live?" still yields the hometown.
func forEachSegment(text string, fn func(off int, seg string)) {
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case ',', ';', '!', '?', '\n', '\r':
		case '.':
			if !sentenceDot(text, i) {
				continue
			}
		default:
			continue
		}
		if c != '?' && i > start {
			end := i
			if c == '.' && initialismEndRE.MatchString(text[max(start, i-rulesLeadBytes):i+1]) {
				end++ // "D.C.": the dot is the short form's
			}
			fn(start, text[start:end])
		}
		start = i + 1
	}
	if start < len(text) {
		fn(start, text[start:])
	}
}

// cutAtTail drops everything from the first word that starts a new clause.
func cutAtTail(kind ruleKind, words []string) []string {
	for i, w := range words {
		if i == 0 {
			continue
		}
		nw := normWord(w)
		if isTailCommon(nw) {
			return words[:i]
		}
		if (nw == "and" || nw == "&" || nw == "or") && i+1 < len(words) && isClauseStarter(normWord(words[i+1])) {
			return words[:i]
		}
		if (nw == "and" || nw == "or") && i+1 == len(words) {
			return words[:i]
		}
		switch kind {
		case kindPlace:
			if isTailPlace(nw) {
				return words[:i]
			}
		case kindEmployer:
			if isTailEmployer(nw) {
				return words[:i]
			}
		case kindThing, kindLiked, kindLanguage:
			// "listening to music", "going to concerts": a lone verb's
			// "to" takes its object; "cooking for my family" is cut.
			if kind != kindLanguage && nw == "to" && i == 1 && takesTo(normWord(words[0])) {
				continue
			}
			if kind == kindLiked && isVerbTail(w) {
				// A predicate: cutting it could invert the meaning ("coffee
				// that is cold", "cats, dogs are too loud"): no value.
				return nil
			}
			if isTailThing(nw) {
				return words[:i]
			}
		case kindCar:
			if isTailPlace(nw) {
				return words[:i]
			}
		case kindOccupation:
			// "a nurse at St Mary's", "a teacher for kids"
			if nw == "at" || nw == "for" || isTailEmployer(nw) {
				return words[:i]
			}
		}
	}
	return words
}

// isNameLike reports whether words could be a person's name: letters,
// apostrophes, hyphens and dots only ("Jean-Luc", "O'Brien", "J.R.").
func isNameLike(words []string) bool {
	for _, w := range words {
		w = strings.TrimRight(w, ".,;:!?")
		if w == "" {
			return false
		}
		for _, r := range w {
			if !unicode.IsLetter(r) && r != '\'' && r != '’' && r != '-' && r != '.' {
				return false
			}
		}
	}
	return true
}

func emailValue(rest string) string {
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	v := strings.Trim(fields[0], `.,;:!?'"“”‘’()<>[]`)
	if !emailRE.MatchString(v) || utf8.RuneCountInString(v) > rulesMaxValueRunes {
		return ""
	}
	return v
}

// isPictograph reports whether r is an emoji or another pictographic
// symbol (Unicode's So: 😊, 🚀, ☕, a flag's letters; not the signs names
// and measures carry: ©, ®, ™, °), or a joiner or a variation selector of
// one: never part of a value the rules keep.
func isPictograph(r rune) bool {
	switch r {
	case '©', '®', '™', '°', '℃', '℉':
		return false // part of a name or a value: "Acme® Corp", "20°"
	}
	return unicode.Is(unicode.So, r) || r == '\u200d' || r >= '\ufe00' && r <= '\ufe0f'
}

// trimValue strips quotes, brackets and punctuation around a value. The
// dot ending a dotted short form ("Washington D.C.", "the U.S.") is part
// of it.
func trimValue(v string) string {
	v = strings.TrimRight(v, " \t,;:!?'\"’”)]…*_~")
	if !initialismEndRE.MatchString(v) {
		v = strings.TrimRight(v, " \t.,;:!?'\"’”)]…*_~")
	}
	v = strings.TrimLeft(v, " \t'\"‘“([*_~")
	return strings.TrimSpace(v)
}

var initialismEndRE = regexp.MustCompile(`(?:^|\s)(?:\p{Lu}\.){2,}$`)

// normWord lowercases w and strips punctuation around it, for set lookups.
func normWord(w string) string {
	return strings.ToLower(strings.Trim(w, `.,;:!?'"“”‘’()[]*_~`))
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isTrailingLiked reports whether the last of words, ending a thing liked,
// is what a cut predicate left: the subject of "the flavor it adds", the
// "to" of "listening to". A pronoun after a preposition is its object and
// stays: "the story behind it".
func isTrailingLiked(words []string) bool {
	last := normWord(words[len(words)-1])
	switch last {
	case "to", "then":
		return true
	case "it", "this", "that", "they", "he", "she", "we", "i", "you":
		if len(words) < 2 {
			return true
		}
		switch normWord(words[len(words)-2]) {
		case "of", "behind", "about", "with", "for", "in", "on", "at", "from", "into", "over", "around", "through", "to":
			return false
		}
		return true
	}
	return false
}

// isNumber reports whether w is digits only: "3" is no thing liked.
func isNumber(w string) bool {
	return w != "" && strings.Trim(w, "0123456789") == ""
}

// takesTo reports whether a gerund's "to" takes its object ("listening to
// music", "going to concerts") rather than starting a purpose ("cooking to
// relax").
func takesTo(w string) bool {
	switch w {
	case "listening", "going", "talking", "travelling", "traveling", "dancing", "singing", "moving", "driving", "flying", "walking", "writing", "reading":
		return true
	}
	return false
}

// verbish reports whether w, after an adverb, makes it a manner ("always
// being late", "better to wait") rather than an adjective ("still water").
func verbish(w string) bool {
	return strings.HasSuffix(w, "ing") || w == "to" || w == "be" || w == "it" || w == "that" || w == "when"
}
