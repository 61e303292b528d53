package extractor

import (
	"regexp"
	"strings"
	"unicode"
)

// Where in a message the user stops speaking about themselves (rules.go):
// after a hypothetical frame ("Assume that my name is ..."), after a text
// pasted for a task ("Summarise this: ...") and inside a quotation. A
// statement there is someone else's, or no one's.

// rulesLeadBytes bounds the lead-in of a pasted text: a request, not a
// paragraph.
const rulesLeadBytes = 300

// rulesNearBytes is how much of a lead-in, before its colon, is looked at
// for the text it refers to ("the review below").
const rulesNearBytes = 80

// voiceEnd returns the offset in text from which statements are not the
// user's own: the first framing cue or pasted text, or len(text).
func voiceEnd(text string) int {
	end := len(text)
	if i := framingCue(text); i >= 0 {
		end = i
	}
	if i := pasteStart(text[:end]); i >= 0 {
		end = i
	}
	return end
}

// framingRE finds a word followed by what could open a supposition about the
// user: "assume that my", "imagine I". The word is checked by
// isFramingVerb, which also takes a misspelling ("Asume"); the word before
// it by isNarratedFrame.
var framingRE = regexp.MustCompile(`(?i)(?:\b([\w'’]+)\s+)?\b([a-z]{5,10})\s+(?:that\s+)?(?:i|i['’]m|i['’]ve|i['’]d|me|my|we|our|someone|somebody)\b` +
	`|\b(?:hypothetically|role-?play(?:ing)?|let['’]?s\s+say)\b` +
	// A frame named outright (a review: "Let's play a game. ... My name
	// is Jack", "Write a story where I'm a wizard", "Scenario: I'm 30").
	`|\b(?:hypothetical\s*:|scenario\s*:|for\s+the\s+sake\s+of\s+argument|let['’]?s\s+(?:play\s+a\s+(?:game|role)|pretend)\b|` +
	`write\s+(?:me\s+)?a\s+(?:story|scene|poem|script|dialogue)\s+(?:where|in\s+which)\b|sample\s+answer\s*:)`)

// framingCue returns the offset of the first cue that frames the rest of the
// message as made up, or -1. The frame runs to the end of the request:
// "Assume that my name is Carlos Ruiz and I'm from Lima. Write my resume." is
// all about a made-up person, not only the clause after "Assume".
func framingCue(text string) int {
	for _, m := range framingRE.FindAllStringSubmatchIndex(text, -1) {
		if m[4] < 0 {
			if cue := strings.ToLower(text[m[0]:m[1]]); strings.HasPrefix(cue, "role") && isGameWord(firstWord(text[m[1]:min(len(text), m[1]+20)])) ||
				strings.HasPrefix(cue, "let") && strings.HasPrefix(strings.TrimLeft(text[m[1]:], " \t"), ",") {
				continue // "roleplaying games"; "let's say, in June"
			}
			return m[0] // "hypothetically", "role-play", "let's say"
		}
		if !isFramingVerb(strings.ToLower(text[m[4]:m[5]])) {
			continue
		}
		if m[2] >= 0 && isNarratedFrame(normWord(text[m[2]:m[3]])) {
			continue
		}
		if isFramingIdiom(text[m[5]:min(len(text), m[5]+40)]) {
			continue
		}
		return m[4]
	}
	return -1
}

// isFramingIdiom reports whether after, the text right after a framing verb,
// makes it an idiom rather than a supposition: "Imagine my surprise".
func isFramingIdiom(after string) bool {
	f := strings.Fields(after)
	if len(f) < 2 || normWord(f[0]) != "my" {
		return false
	}
	switch normWord(f[1]) {
	case "surprise", "shock", "horror", "delight", "relief", "disappointment", "joy", "embarrassment", "face":
		return true
	}
	return false
}

func isGameWord(w string) bool {
	switch w {
	case "game", "games", "gaming", "server", "servers", "group", "groups", "club", "community", "campaign", "campaigns":
		return true
	}
	return false
}

// isNarratedFrame reports whether w, right before a framing verb, makes it
// a remark rather than a supposition: "I can't imagine my life without
// ...", "I imagine my cat misses me", "people always assume I'm Spanish".
// A supposition is a request: the verb starts its sentence or follows a
// softener ("let's imagine", "please assume", "can you pretend").
func isNarratedFrame(w string) bool {
	switch w {
	case "let's", "let’s", "lets", "let", "us", "please", "pls", "now", "just", "so", "and", "ok", "okay", "then", "also",
		"hey", "hi", "hello", "but", "or", "first", "again", "simply", "you", "also,", "instead":
		return false
	}
	return true
}

// framingVerbs open a supposition. A word one edit away (a letter dropped,
// added, changed or two swapped) is taken as a misspelling of one, except
// the real words in notFraming: other verbs, and past tenses, which narrate.
var framingVerbs = []string{"assume", "assuming", "presume", "presuming", "suppose", "supposing", "imagine", "imagining", "pretend", "pretending"}

var notFraming = map[string]bool{"assure": true, "assured": true, "resume": true, "assumed": true, "presumed": true, "supposed": true, "imagined": true, "pretended": true,
	// Third persons narrate ("everyone assumes I'm older"); real words one
	// edit away are not misspellings.
	"assumes": true, "presumes": true, "supposes": true, "imagines": true, "pretends": true,
	"imaging": true, "assuring": true, "prepend": true}

func isFramingVerb(w string) bool {
	if notFraming[w] {
		return false
	}
	for _, v := range framingVerbs {
		if w == v || withinOneEdit(w, v) {
			return true
		}
	}
	return false
}

// withinOneEdit reports whether a and b (ASCII) differ by one insertion,
// deletion, substitution or transposition of neighbours.
func withinOneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		if i == len(a) {
			return true
		}
		if a[i+1:] == b[i+1:] {
			return true // substitution
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case 1:
		i := 0
		for i < len(a) && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	}
	return false
}

// pasteVerbRE finds a request that works on a text the user then pastes:
// "Summarise in 5 bullets:", "Reply to this review and thank them:",
// "Can you proofread this:". The sentence starts with the request, of two
// words or more: "Edit: I meant Porto" is the user's own. Verbs that are
// as often nouns or other statements ("turn 3:", "check:") are not taken.
var pasteVerbRE = regexp.MustCompile(`(?i)^(?:(?:please|pls|kindly|now|ok|okay|hi|hey|hello|can\s+you|could\s+you|would\s+you|will\s+you|help\s+me|i\s+need\s+you\s+to|i\s+want\s+you\s+to|i['’]d\s+like\s+you\s+to)[\s,]+)*` +
	`(?:summari[sz]e|sum\s+up|reply|respond|answer|translate|rewrite|re-write|rephrase|reword|paraphrase|proofread|edit|correct|improve|polish|shorten|condense|expand|analy[sz]e|review|explain|simplify|classify|categori[sz]e|extract|reformat|convert|write|draft|compose|give\s+me|grade|evaluate|critique|comment\s+on|tl;?dr)\b`)

// pasteNounRE finds a reference to a text that follows: "the following:",
// "this transcript:", "the review below:", "a text from my landlord:", "my
// boss's email:" (not "My email:", the user's own).
var pasteNounRE = regexp.MustCompile(`(?i)\b(?:the\s+following|below|(?:this|these|that|the|his|her|their|a|an|my\s+[\w-]+['’]s)\s+(?:[\w'’-]+\s+){0,2}(?:text|texts|review|reviews|transcript|article|comment|comments|e-?mail|message|post|passage|paragraph|excerpt|essay|script|letter|document|interview|conversation|dialogue|dialog|chat|speech|content|tweet|thread|feedback|testimonial|quote|lyrics|paper|abstract|report|description|section))\b|\b(?:this|these|below)\s*$`)

// isOwnRequest reports whether after, the rest of a request after its verb,
// asks for something for the user rather than work on a pasted text: "Write
// me a workout plan:", "Review my budget:", "Give me some dinner ideas:".
func isOwnRequest(after string) bool {
	return firstPersonRE.MatchString(after) || ownAskRE.MatchString(after)
}

// ownAskRE finds what a request asks for that is made for the user, not
// done to a text.
var ownAskRE = regexp.MustCompile(`(?i)\b(?:ideas?|advice|tips|suggestions?|recommendations?|plan|recipes?|options)\b`)

// ownLeadRE finds a lead-in that announces the user's own information: "A
// bit of context:", "Here's the situation:", "One more thing:".
var ownLeadRE = regexp.MustCompile(`(?i)\b(?:context|background|situation|details|info|information|question|thing|update|so\s+you\s+know|fyi)\b`)

// pasteAloneRE is a task verb that is the whole lead-in of a pasted text.
var pasteAloneRE = regexp.MustCompile(`(?i)^(?:summari[sz]e|translate|proofread|paraphrase|rephrase|tl;?dr)$`)

// firstPersonRE finds the user speaking of themselves in the lead-in of a
// block.
var firstPersonRE = regexp.MustCompile(`(?i)\b(?:i|i['’]m|me|my|mine|myself|we|our|us)\b`)

// pasteStart returns the offset of a text pasted for a task, or -1: the text
// after a colon that ends a request on it ("Reply to this review: I'm 43
// ..." is the reviewer's age), or after a colon and a line break that end a
// lead-in of three or more words not about the user (a request in another
// language: "Vat samen in 10 bullets:\n\n..."). The paste runs to the end of
// the message. "My situation: I live in Lisbon" and "About me:\nI'm 34" are
// the user's. Only the first rulesLeadBytes of a sentence are a lead-in, so
// that a message of colons costs linear time.
func pasteStart(text string) int {
	start := 0 // of the sentence
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '!' || c == '?' || c == '\n' || c == '\r' || c == '.' && sentenceDot(text, i):
			start = i + 1
			continue
		case c != ':' || i+1 < len(text) && !isSpaceByte(text[i+1]):
			continue // "10:30", "https://"
		}
		if i-start > rulesLeadBytes {
			continue
		}
		lead := strings.TrimSpace(text[start:i])
		if lead == "" {
			continue
		}
		near := lead[max(0, len(lead)-rulesNearBytes):] // "... this review below"
		if pasteNounRE.MatchString(near) {
			return i + 1
		}
		if loc := pasteVerbRE.FindStringIndex(lead); loc != nil && strings.ContainsAny(lead, " \t") && !isOwnRequest(lead[loc[1]:]) {
			return i + 1
		}
		if pasteAloneRE.MatchString(lead) {
			return i + 1 // "Summarize:", "Translate:" (not "Edit:", "Update:")
		}
		if rest := strings.TrimLeft(text[i+1:], " \t"); (strings.HasPrefix(rest, "\n") || strings.HasPrefix(rest, "\r")) &&
			len(strings.Fields(lead)) >= 3 && !firstPersonRE.MatchString(lead) && !ownLeadRE.MatchString(lead) {
			return i + 1
		}
	}
	return -1
}

// quoteMask marks the bytes of text inside a double-quoted passage that the
// message opened and, up to there, has not closed: in `Summarise "... I'm
// 72 ...` that age is someone else's. (Single quotes are apostrophes too
// often to count.)
func quoteMask(text string) []bool {
	// Straight and curly marks share one state, as writers mix them ("“Dune\"",
	// „Der Vorleser“); a straight mark right after a digit is inches (5'10",
	// a 12" pizza) unless a quote is open ("Apollo 13").
	in := make([]bool, len(text)+1)
	open := false
	for i := 0; i < len(text); i++ {
		in[i] = open
		switch {
		case text[i] == '"':
			if open || i == 0 || text[i-1] < '0' || text[i-1] > '9' {
				open = !open
			}
		case strings.HasPrefix(text[i:], "“"), strings.HasPrefix(text[i:], "„"):
			open = !open
		case strings.HasPrefix(text[i:], "”"):
			open = false
		}
	}
	in[len(text)] = open
	return in
}

// startsUpper reports whether w starts with an upper-case letter, or a
// letter of a script without case ("東京", "李伟").
func startsUpper(w string) bool {
	for _, r := range w {
		return unicode.IsUpper(r) || unicode.IsLetter(r) && !unicode.IsLower(r) && unicode.SimpleFold(r) == r
	}
	return false
}

// isPlaceLike reports whether words name a place: capitalised words ("New
// York City", "São Paulo") or numbered ones ("District 9", "zone3"), with
// connectors ("Rio de Janeiro", "the south of France") and kinds of area
// after a name ("the Bay area"); not a common noun phrase ("the moment",
// "Microsoft support").
func isPlaceLike(words []string) bool {
	named := false
	for i, w := range words {
		nw := normWord(w)
		switch {
		case startsUpper(w), strings.ContainsAny(nw, "0123456789") && !isNumber(nw):
			named = true
		case isNumber(nw):
			named = named || i > 0 && isPlacePart(normWord(words[i-1]))
		case i == 0 && nw == "the", isPlaceConnector(nw):
		case isPlacePart(nw) && (named || i+1 < len(words)):
			// "northern Italy", "the outskirts of Lyon", "Kent county".
		default:
			return false
		}
	}
	return named
}

func isPlaceConnector(w string) bool {
	switch w {
	case "of", "de", "da", "do", "dos", "das", "del", "della", "di", "du", "des", "la", "le", "les", "el", "los", "las",
		"upon", "on", "sur", "am", "an", "im", "y", "e", "and", "&", "van", "von", "der", "den", "ter", "aan":
		return true
	}
	return false
}

// isPlacePart reports whether w, written in lower case, is a part or a kind
// of an area that a name goes with.
func isPlacePart(w string) bool {
	switch w {
	case "north", "south", "east", "west", "northern", "southern", "eastern", "western", "central", "northeast", "northwest",
		"southeast", "southwest", "north-east", "north-west", "south-east", "south-west", "upstate", "downstate", "downtown",
		"rural", "coastal", "outskirts", "suburbs", "middle", "heart", "centre", "center", "part", "area", "region", "state",
		"county", "province", "city", "district", "countryside", "coast", "island", "islands", "valley", "metro", "greater":
		return true
	}
	return false
}

// isLanguageName reports whether words name a language: capitalised, as
// English writes languages ("French", "Brazilian Portuguese"), or a common
// one in lower case ("spanish"); not "too fast", "my mind".
func isLanguageName(words []string) bool {
	for _, w := range words {
		if !startsUpper(w) {
			return isCommonLanguage(normWord(words[len(words)-1]))
		}
	}
	return true
}

func isCommonLanguage(w string) bool {
	switch w {
	case "english", "spanish", "french", "german", "italian", "portuguese", "dutch", "russian", "ukrainian", "polish", "czech",
		"slovak", "hungarian", "romanian", "bulgarian", "greek", "turkish", "arabic", "hebrew", "persian", "farsi", "urdu",
		"hindi", "bengali", "punjabi", "tamil", "telugu", "marathi", "gujarati", "chinese", "mandarin", "cantonese",
		"japanese", "korean", "vietnamese", "thai", "indonesian", "malay", "tagalog", "filipino", "swahili", "swedish",
		"norwegian", "danish", "finnish", "icelandic", "irish", "welsh", "catalan", "basque", "galician", "croatian",
		"serbian", "bosnian", "slovenian", "albanian", "armenian", "georgian", "latin", "esperanto", "yoruba", "igbo",
		"hausa", "amharic", "somali", "zulu", "afrikaans", "estonian", "latvian", "lithuanian":
		return true
	}
	return false
}

// isStandingLike reports whether words, a thing liked, can be a lasting
// taste rather than a reaction to something said before: not with a clause
// inside ("the sense of accomplishment I get"), not a quality of something
// unnamed ("the physical challenge of it", "the self-acceptance", "food of
// this city") and not what a reply offered ("the quinoa bowl idea", "the
// template"). A capitalised head is a title or a name ("The Last of Us").
func isStandingLike(words []string) bool {
	n := len(words)
	for i := 1; i < n; i++ {
		switch w := normWord(words[i]); w {
		case "i", "we", "they", "he", "she", "you've", "you’ve", "you'd", "you’d", "this", "these", "those":
			return false
		case "it":
			// "the freedom it brings"; not "listening to it", "making it".
			if prev := normWord(words[i-1]); i+1 < n && !isPreposition(prev) && !strings.HasSuffix(prev, "ing") {
				return false
			}
		}
	}
	if n >= 2 && normWord(words[n-2]) == "of" && isObjectPronoun(normWord(words[n-1])) {
		return false
	}
	if n < 2 || normWord(words[0]) != "the" {
		return true
	}
	head := ""
	for _, w := range words[1:] {
		if isPreposition(normWord(w)) {
			break
		}
		head = w
	}
	if head == "" || head != strings.ToLower(head) {
		return true
	}
	head = normWord(head)
	return !isAbstractNoun(head) && !isReplyArtifact(head)
}

func isPreposition(w string) bool {
	switch w {
	case "of", "behind", "about", "for", "from", "in", "on", "at", "with", "to", "by", "between", "around", "into", "over":
		return true
	}
	return false
}

// isAbstractNoun reports whether w names a quality or a feeling: "the
// self-acceptance", "the energy".
func isAbstractNoun(w string) bool {
	switch w {
	case "sense", "feeling", "feelings", "challenge", "energy", "vibe", "vibes", "atmosphere", "thrill", "rush", "joy", "peace",
		"calm", "process", "concept", "aspect", "aspects", "part", "parts", "nature", "quality", "variety", "look", "feel":
		return true
	}
	w = strings.TrimSuffix(w, "s")
	for _, suf := range []string{"ance", "ence", "ness", "ment", "ity", "ship", "dom", "hood", "tion", "sion"} {
		if strings.HasSuffix(w, suf) && len(w) > len(suf)+2 {
			return true
		}
	}
	return false
}

// isReplyArtifact reports whether w names something a reply offers: "the
// idea", "the template", "the schedule".
func isReplyArtifact(w string) bool {
	switch w {
	case "idea", "ideas", "option", "options", "suggestion", "suggestions", "recommendation", "recommendations", "template",
		"plan", "schedule", "recipe", "recipes", "layout", "structure", "format", "list", "outline", "itinerary", "draft",
		"version", "example", "examples", "answer", "response", "explanation", "tips", "advice", "breakdown", "summary",
		"theme", "approach":
		return true
	}
	return false
}
