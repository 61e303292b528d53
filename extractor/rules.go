package extractor

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RulesPromptVersion is the PromptVersion of [Rules]. It changes whenever the
// rules change in a way that changes results.
const RulesPromptVersion = "rules-v1"

const (
	// rulesScanBytes bounds the work spent looking for facts: only the start
	// of a long message is scanned. Self-introductions come early.
	rulesScanBytes = 8 << 10
	// rulesMaxValueRunes bounds a fact value. A longer capture means the
	// clause detection failed, so such a value is dropped, not truncated.
	rulesMaxValueRunes = 100
	// rulesValueScanBytes bounds the text after a statement that is looked
	// at for its value: at least 2.5 times the longest value kept.
	rulesValueScanBytes = 1 << 10
	// rulesMaxNameWords bounds person names ("Ana Maria da Silva").
	rulesMaxNameWords = 5
)

// Rules is the offline, deterministic extractor. It is the default when no
// model is configured.
//
// It stores the turn verbatim as one context pair (Q is the user message and
// A the assistant response, both after [StripMarkers], trimming and
// sanitising to valid UTF-8 without NUL bytes; no pair when the user message
// is empty) and picks up common self-statements made by the user. The
// assistant's text is never read for facts. Recognised statements, matched
// case-insensitively (values keep their case):
//
//	my name is X / I'm called X            name
//	call me X                              preferred_name
//	I live in X / I'm living in X /
//	I'm based in X / I moved to X          location
//	I'm from X                             hometown (where one is from is not
//	                                       necessarily where one lives)
//	I work at X / I work for X             employer
//	I work as (a/an) X                     occupation
//	my favorite/favourite X is Y           favorite_<x>
//	I prefer X                             preference
//	I am N years old                       age
//	I'm allergic to X                      allergy
//	my birthday / date of birth is X       birthday ("today"/"tomorrow" are
//	                                       anchored to the turn's timestamp)
//	my email (address) is X                email
//	my timezone is X                       timezone
//	my pronouns are X                      pronouns
//	my native/first language is X          native_language
//	my wife's/husband's/partner's name is X   wife_name, husband_name, partner_name
//
// A value ends at . , ; ! ? or a line break, and before clause tails such as
// "but", "because" or "and I ..." ("fish and chips" stays whole). Statements
// in questions ("... ?"), hypotheticals ("if my name is ...") and negations
// ("don't call me ...") are ignored. Values that are not plausible for their
// key ("call me back", "I live in a flat") and values longer than 100
// characters are dropped. All statements in a message count; for the same key
// the later one wins. Only the first 8 KiB of the message are scanned.
//
// The rules favour precision over recall: a missed fact costs less than a
// wrong one that is then recalled into every conversation.
type Rules struct {
	rules []rule
}

// NewRules returns the rules extractor.
func NewRules() *Rules { return &Rules{rules: newRuleTable()} }

// Info returns Info{Name: "rules", PromptVersion: RulesPromptVersion}.
func (r *Rules) Info() Info {
	return Info{Name: "rules", Model: "", PromptVersion: RulesPromptVersion}
}

// Extract extracts from in.Turn. in.Prior and in.FactKeys are not used. It
// fails only when ctx is already done.
func (r *Rules) Extract(ctx context.Context, in Input) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError("rules extraction", err)
	}

	table := r.rules
	if table == nil { // a zero Rules{} still works, just compiles per call
		table = newRuleTable()
	}
	user := sanitize(StripMarkers(in.Turn.UserMessage))
	res := Result{Facts: ruleFacts(table, user, in.Turn.Timestamp)}
	if user != "" {
		res.Context = []QA{{Q: user, A: sanitize(StripMarkers(in.Turn.AssistantResponse))}}
	}
	return res, nil
}

// ruleKind selects how a rule's value is checked and cleaned.
type ruleKind int

const (
	kindName ruleKind = iota
	kindCallMe
	kindPlace
	kindEmployer
	kindOccupation
	kindPlain
	kindAge
	kindEmail
	kindBirthday
	kindShort
)

// rule recognises one kind of self-statement. The value starts where the
// match ends, except for age where it is the first submatch. For keyed rules
// the key comes from the first submatch.
type rule struct {
	key  string
	re   *regexp.Regexp
	kind ruleKind
	// keyFromGroup builds the key from the first submatch.
	keyFromGroup func(group string) string
}

// im matches "I'm", "I’m", "Im" and "I am".
const im = `\bi(?:['’]?m|\s+am)\s+`

// newRuleTable compiles the statements Rules recognises, in no particular
// order (facts are ordered by position in the message).
func newRuleTable() []rule {
	return []rule{
		{key: "name", re: regexp.MustCompile(`(?i)\bmy\s+name\s+is\s+`), kind: kindName},
		{key: "name", re: regexp.MustCompile(`(?i)` + im + `called\s+`), kind: kindName},
		{key: "preferred_name", re: regexp.MustCompile(`(?i)\b(?:please\s+)?call\s+me\s+`), kind: kindCallMe},
		{key: "location", re: regexp.MustCompile(`(?i)\bi\s+live\s+in\s+`), kind: kindPlace},
		{key: "location", re: regexp.MustCompile(`(?i)` + im + `(?:living|based)\s+in\s+`), kind: kindPlace},
		{key: "location", re: regexp.MustCompile(`(?i)\bi(?:\s+(?:have|just|recently)|['’]ve)?\s+moved\s+to\s+`), kind: kindPlace},
		{key: "hometown", re: regexp.MustCompile(`(?i)` + im + `(?:originally\s+)?from\s+`), kind: kindPlace},
		{key: "employer", re: regexp.MustCompile(`(?i)\bi\s+work\s+(?:at|for)\s+`), kind: kindEmployer},
		{key: "employer", re: regexp.MustCompile(`(?i)` + im + `(?:working\s+(?:at|for)|employed\s+(?:at|by))\s+`), kind: kindEmployer},
		{key: "occupation", re: regexp.MustCompile(`(?i)\bi\s+work\s+as\s+(?:an?\s+)?`), kind: kindOccupation},
		{key: "occupation", re: regexp.MustCompile(`(?i)` + im + `working\s+as\s+(?:an?\s+)?`), kind: kindOccupation},
		{
			re:   regexp.MustCompile(`(?i)\bmy\s+(?:all[- ]time\s+)?favou?rite\s+([a-z][a-z -]{0,40}?)\s+(?:is|are)\s+`),
			kind: kindPlain,
			keyFromGroup: func(g string) string {
				if k := snakeKey(g); k != "" && strings.Count(k, "_") < 4 {
					return "favorite_" + k
				}
				return ""
			},
		},
		{key: "preference", re: regexp.MustCompile(`(?i)\bi\s+(?:really\s+|generally\s+|usually\s+)?prefer\s+`), kind: kindPlain},
		{key: "age", re: regexp.MustCompile(`(?i)` + im + `(\d{1,3})(?:\s+|-)?(?:years?|yrs?)(?:\s+|-)?old\b`), kind: kindAge},
		{key: "allergy", re: regexp.MustCompile(`(?i)` + im + `(?:(?:very|severely|highly)\s+)?allergic\s+to\s+`), kind: kindPlain},
		{key: "birthday", re: regexp.MustCompile(`(?i)\bmy\s+(?:birthday|date\s+of\s+birth)\s+is\s+(?:on\s+|in\s+)?`), kind: kindBirthday},
		{key: "email", re: regexp.MustCompile(`(?i)\bmy\s+e-?mail(?:\s+address)?\s+is\s+`), kind: kindEmail},
		{key: "timezone", re: regexp.MustCompile(`(?i)\bmy\s+time\s*zone\s+is\s+`), kind: kindShort},
		{key: "pronouns", re: regexp.MustCompile(`(?i)\bmy\s+pronouns\s+are\s+`), kind: kindShort},
		{key: "native_language", re: regexp.MustCompile(`(?i)\bmy\s+(?:native|first)\s+language\s+is\s+`), kind: kindShort},
		{
			re:   regexp.MustCompile(`(?i)\bmy\s+(wife|husband|partner)['’]?s\s+name\s+is\s+`),
			kind: kindName,
			keyFromGroup: func(g string) string {
				return strings.ToLower(g) + "_name"
			},
		},
	}
}

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
	case "not", "a", "an", "the", "on", "in", "at", "also", "still", "pronounced", "spelled", "spelt", "is", "was", "that", "this", "it", "too", "so", "very", "hard", "long", "weird", "difficult":
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
	case "not", "that", "it":
		return true
	}
	return false
}

// isTailCommon reports whether w ends any value: what follows starts
// another clause.
func isTailCommon(w string) bool {
	switch w {
	case "but", "because", "since", "although", "though", "so", "which", "who", "whom", "whose", "where", "when", "while", "if", "unless", "whereas", "btw", "lol", "haha", "tho", "thanks", "thank", "please":
		return true
	}
	return false
}

// isTailPlace adds, for places, words that start a temporal or circumstantial
// tail:
// "I live in Berlin with my wife", "I moved to Lisbon last year".
func isTailPlace(w string) bool {
	switch w {
	case "with", "for", "in", "at", "near", "since", "last", "next", "this", "right", "now", "nowadays", "currently", "recently", "ago", "yesterday", "today", "tomorrow", "these", "as", "after", "before", "until", "during", "from", "to":
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
	case "actually", "really", "just", "literally", "basically", "currently", "now", "officially":
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

type foundFact struct {
	pos        int
	key, value string
}

// ruleFacts returns the facts found in the user's text; later statements win.
func ruleFacts(table []rule, text string, ts time.Time) map[string]string {
	facts := make(map[string]string)
	text, _ = truncateUTF8(text, rulesScanBytes)

	var found []foundFact
	forEachSegment(text, func(off int, seg string) {
		for _, r := range table {
			for _, m := range r.re.FindAllStringSubmatchIndex(seg, -1) {
				if isHypothetical(seg[:m[0]]) {
					continue
				}
				key := r.key
				if r.keyFromGroup != nil {
					if key = r.keyFromGroup(seg[m[2]:m[3]]); key == "" {
						continue
					}
				}
				var value string
				if r.kind == kindAge {
					value = ageValue(seg[m[2]:m[3]])
				} else {
					value = cleanValue(r.kind, seg[m[1]:], ts)
				}
				if value != "" {
					found = append(found, foundFact{pos: off + m[0], key: key, value: value})
				}
			}
		}
	})

	sort.SliceStable(found, func(i, j int) bool { return found[i].pos < found[j].pos })
	for _, f := range found {
		facts[f.key] = f.value
	}
	return facts
}

// forEachSegment calls fn for every clause of text that is not a question.
// Clauses end at , ; ! ? and line breaks, and at a '.' that ends a sentence
// (followed by space or the end), so that "ana@example.com" and "Acme Inc"
// stay whole. A clause ending in '?' is a question and is skipped, so "I'm
// from Lisbon, where do you live?" still yields the hometown.
func forEachSegment(text string, fn func(off int, seg string)) {
	start := 0
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case ',', ';', '!', '?', '\n', '\r':
		case '.':
			if i+1 < len(text) && !isSpaceByte(text[i+1]) {
				continue
			}
		default:
			continue
		}
		if c != '?' && i > start {
			fn(start, text[start:i])
		}
		start = i + 1
	}
	if start < len(text) {
		fn(start, text[start:])
	}
}

// isHypothetical reports whether the word right before a statement marks it
// as hypothetical, reported or negated ("if my name is", "say I live in",
// "don't call me").
// It looks only at that word, so that many statements in one long clause
// cost linear time.
func isHypothetical(before string) bool {
	before = strings.TrimRightFunc(before, unicode.IsSpace)
	word := before[strings.LastIndexFunc(before, unicode.IsSpace)+1:]
	return isHypotheticalWord(normWord(word))
}

func ageValue(digits string) string {
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > 130 {
		return ""
	}
	return strconv.Itoa(n)
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

	// Cut at separators that never belong to a value.
	for _, sep := range []string{" (", " - ", " – ", " — ", `"`, "“", "”", ":)", ":-)", "..."} {
		if i := strings.Index(rest, sep); i >= 0 {
			rest = rest[:i]
		}
	}
	if kind == kindPlace || kind == kindEmployer {
		if loc := durationTailRE.FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]]
		}
	}

	words := strings.Fields(rest)
	for len(words) > 0 && isLeadingFiller(normWord(words[0])) {
		words = words[1:]
	}
	words = cutAtTail(kind, words)
	for len(words) > 0 && isTrailingFiller(normWord(words[len(words)-1])) {
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
		if isBadLeadPlace(first) {
			return ""
		}
	case kindEmployer:
		if isBadLeadEmployer(first) {
			return ""
		}
	case kindOccupation, kindPlain, kindShort, kindBirthday:
		if isBadLeadPlain(first) {
			return ""
		}
	}
	if kind == kindShort && len(words) > 4 {
		return ""
	}

	value := trimValue(strings.Join(words, " "))
	if kind == kindBirthday {
		value = birthdayValue(value, ts)
	}
	if isUnknownValue(strings.ToLower(value)) || utf8.RuneCountInString(value) > rulesMaxValueRunes {
		return ""
	}
	return value
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

// birthdayValue anchors "today" and "tomorrow" to the turn's own date and
// drops other relative dates, which cannot be a birthday.
func birthdayValue(v string, ts time.Time) string {
	switch strings.ToLower(v) {
	case "today":
		if ts.IsZero() {
			return ""
		}
		return ts.Format("January 2")
	case "tomorrow":
		if ts.IsZero() {
			return ""
		}
		return ts.AddDate(0, 0, 1).Format("January 2")
	}
	lower := strings.ToLower(v)
	for _, rel := range []string{"yesterday", "next ", "this ", "soon", "coming up", "in a ", "in two", "in 2", "in few"} {
		if strings.HasPrefix(lower, rel) {
			return ""
		}
	}
	return v
}

// trimValue strips quotes, brackets and punctuation around a value.
func trimValue(v string) string {
	v = strings.TrimRight(v, " \t.,;:!?'\"’”)]…*_~")
	v = strings.TrimLeft(v, " \t'\"‘“([*_~")
	return strings.TrimSpace(v)
}

// normWord lowercases w and strips punctuation around it, for set lookups.
func normWord(w string) string {
	return strings.ToLower(strings.Trim(w, `.,;:!?'"“”‘’()[]*_~`))
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}
