package extractor

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// RulesPromptVersion is the PromptVersion of [Rules]. It changes whenever the
// rules change in a way that changes results.
const RulesPromptVersion = "rules-v2"

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
	// rulesMaxItemWords bounds one item of a list (a like, a hobby, a goal).
	rulesMaxItemWords = 8
	// rulesLookbackWords is how many words before a statement, in its
	// clause, are looked at for a hypothetical or reported-speech marker.
	rulesLookbackWords = 6
)

// Rules is the offline, deterministic extractor. It is the default when no
// model is configured.
//
// It stores the turn verbatim as one context pair (Q is the user message and
// A the assistant response, both after [StripMarkers], trimming and
// sanitising to valid UTF-8 without NUL bytes; no pair when the user message
// is empty) and picks up common self-statements made by the user as fact
// operations on the canonical keys (events.FactKeys, docs/protocol.md "Fact
// keys"), resolved like a model's by the same code. The assistant's text is
// never read for facts, and neither are the user's current facts or earlier
// turns: a turn's result depends on the turn alone, so that any processing
// order and replays give the same facts. Recognised statements, matched
// case-insensitively (values keep their case):
//
//	my name is X / I'm called X (capitalised)   set name
//	call me X                                   set preferred_name
//	I live in X / I'm living|based in X /
//	I moved (back) to X / moved from Y to X     set location (X a place:
//	                                            "New York", "the south of
//	                                            France"; not "the moment",
//	                                            "Microsoft support")
//	I don't live in X anymore / I no longer
//	live in X / I moved away from|out of X      delete location (unless the
//	                                            message sets a new one)
//	I'm from X / I grew up in X                 set hometown (X a place)
//	I work at|for X / I'm working at X          set employer
//	I work as (a) X                             set occupation (not "as hard
//	                                            as I can")
//	I no longer work at X / I don't work for X
//	anymore                                     delete employer
//	I quit|left|lost my job (at X) / I got
//	fired|laid off / I'm unemployed             delete occupation and employer
//	I'm retired / I retired                     set occupation "retired",
//	                                            delete employer
//	I graduated from X / I study at X           set education
//	I'm (also) allergic to X(, Y and Z) /
//	I have a X allergy                          add allergies
//	I'm no longer allergic to X / I'm not
//	allergic to X anymore / I outgrew my X
//	allergy                                     remove allergies
//	I'm (a) vegetarian|vegan|... / I went vegan set diet
//	I'm no longer vegetarian / I'm not vegan
//	anymore / I used to be vegetarian           delete diet
//	I'm lactose|gluten intolerant / I'm celiac /
//	I don't eat pork|meat|...                   add dietary_restrictions
//	I (also) speak X(, Y and Z) /
//	I'm fluent in X                             add languages (language
//	                                            names: "French", "french";
//	                                            not "too fast")
//	I no longer speak X / I don't speak X
//	anymore                                     remove languages
//	my native|first language / mother tongue
//	is X                                        set native_language
//	my dog|cat|... (is named) X / I have a dog
//	named X / my dog's name is X                add pets "X (dog)"
//	my dog X died|passed away|ran away          remove pets "X (dog)"
//	my daughter|son (is named) X / I have a son
//	named X                                     add children "X (daughter)"
//	my kids are X and Y                         add children "X", "Y"
//	my sister|brother X                         add siblings "X (sister)"
//	my wife|husband|girlfriend|... X / my wife's
//	name is X / I'm married to X                set partner "X (wife)"
//	I'm married|single|divorced|engaged|...     set relationship_status ("married
//	                                            to" a person only; single,
//	                                            divorced, widowed, separated
//	                                            also delete partner)
//	we broke up                                 delete partner
//	I like|love|enjoy X                         add likes, remove dislikes
//	                                            (not a reaction: "the quinoa
//	                                            bowl idea", "the challenge of
//	                                            it", "the sense of ... I get")
//	I hate|dislike|don't like|can't stand X     add dislikes, remove likes
//	I no longer like X / I don't like X anymore remove likes
//	my hobbies are X, Y and Z                   set hobbies
//	my hobby is X / I play X                    add hobbies
//	I stopped playing X / I don't play X
//	anymore                                     remove hobbies
//	my goal is (to) X                           add goals
//	I drive a X / my car is a X                 set car
//	I sold|got rid of my car / I don't have a
//	car                                         delete car
//	I'm N (years old) / I (just) turned N       set birth_year (see below)
//	I was born in YYYY                          set birth_year
//	my birthday / date of birth is X /
//	I was born on X                             set birthday, YYYY-MM-DD or
//	                                            MM-DD ("today" and "tomorrow"
//	                                            are anchored to the turn)
//	my favorite/favourite X is Y                set favorite_<x> (colour,
//	                                            flavour, theatre: color, ...)
//	I prefer X                                  add to preferences
//	my email (address) is X                     set email
//	my timezone is X / my pronouns are X        set timezone, pronouns
//	..., I meant X / I mean X                   corrects the statement just
//	                                            before it in the message
//
// An age N is stored as the birth year: the turn's year minus N when the
// birthday given in the same message has passed on the turn's date, minus
// N+1 when it has not; without a birthday, minus N from 1 July on and N+1
// before (the likelier year). "I just turned N", "I turned N last week" is
// the turn's year minus N; "I turned N in May" is the year of the last May.
// Without a turn timestamp an age is not stored.
//
// A value ends at . , ; ! ?, a line break or an emoji (a '.' after "St",
// "Mt", "Dr" and the like before a name does not end it: "St. Louis"), and
// before clause tails such as
// "but", "because" or "and I ..." ("fish and chips" stays whole); list
// values run on over commas ("peanuts, shellfish and eggs" is three items).
// Statements in questions ("... ?"), hypotheticals ("if I lived in ...",
// "imagine I'm vegan"), reported or quoted speech ("she said 'I live in
// Rome'", "he told me my name is ...") and negations ("I'm not vegetarian",
// "don't call me ...") store nothing. Neither does anything after a
// supposition that frames the rest of the message ("Assume that my name
// is ...", "let's imagine I ...", misspelt too: "Asume"; a request, not
// "people assume I'm ..." or "Imagine my surprise"; or a frame named
// outright: "Let's play a game", "Write a story where", "Scenario:", "for
// the sake of argument"), after a colon that ends a request on a pasted
// text ("Summarise this:", "Reply to this review:", "the following:", a
// task verb alone, "Summarize:", or a lead-in of three or more words not
// about the user before a line break; not "Write me a plan:" or "A bit of
// context:"), or
// inside a double quote left open (not an inch mark: 5'10") ("Give me
// bullets on "... I'm 72 ..."). Only the forms above with "no
// longer", "anymore" and the like remove or delete. Statements about other
// people are not the user's facts ("my friend is allergic to peanuts"
// stores nothing; "my daughter Mia is allergic to eggs" only adds the
// child). Values that are not plausible for their key ("call me back", "I
// live in a flat") and values longer than 100 characters are dropped. All
// statements in a message count, in order; for the same key or item the
// later one wins. Only the first 8 KiB of the message are scanned.
//
// The rules favour precision over recall: a missed fact costs less than a
// wrong one that is then recalled into every conversation.
type Rules struct {
	rules []rule
}

// britishSpelling makes a favourite's key the one the American spelling
// gives ("my favourite colour" is favorite_color, as the key's own
// "favorite" is), so that a frontend or a later statement finds one key.
var britishSpelling = strings.NewReplacer("colour", "color", "flavour", "flavor", "theatre", "theater")

// NewRules returns the rules extractor.
func NewRules() *Rules { return &Rules{rules: ruleTable()} }

// ruleTable is the rules, compiled once: a table is only read (a regexp is
// safe for concurrent use), and compiling it took 4.7 ms, which every
// configuration's defaults paid (the rules are the default extractor).
var ruleTable = sync.OnceValue(func() []rule {
	table := newRuleTable()
	for i := range table {
		table[i].lits = requiredLiterals(table[i].re)
	}
	return table
})

// Info returns Info{Name: "rules", PromptVersion: RulesPromptVersion}.
func (r *Rules) Info() Info {
	return Info{Name: "rules", Model: "", PromptVersion: RulesPromptVersion}
}

// Extract extracts from in.Turn. in.Prior, in.FactKeys and in.Facts are not
// used. It fails only when ctx is already done.
func (r *Rules) Extract(ctx context.Context, in Input) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, ctxError("rules extraction", err)
	}

	table := r.rules
	if table == nil { // a zero Rules{} still works
		table = ruleTable()
	}
	user := sanitize(StripMarkers(in.Turn.UserMessage))
	facts, changes := resolveOps(ruleItems(table, user, in.Turn.Timestamp))
	res := Result{Facts: facts, Changes: changes}
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
	kindEmail
	kindBirthday
	kindShort
	kindThing    // an item of a list: a food, a hobby, a goal
	kindLiked    // a thing liked or disliked: kindThing, and not an adverb ("I like better") or a clause
	kindLanguage // a language's name
	kindCar
)

// listMode says whether a rule's value is a list of items.
type listMode int

const (
	// oneValue: the value ends at the clause's end.
	oneValue listMode = iota
	// listItems: "A, B and C" is items, split at commas and, after a comma,
	// at "and"; "fish and chips" stays one item.
	listItems
	// listItemsAnd: "A and B" is two items too; for nouns that never hold
	// "and" (allergens, languages).
	listItemsAnd
)

// ruleOp is one operation a statement makes.
type ruleOp struct {
	op         FactOp
	key, value string
}

// Internal keys, replaced before the operations are resolved.
const (
	keyAge   = "\x00age"   // value: an age; becomes birth_year
	keyMeant = "\x00meant" // value: the rest of the clause; corrects the statement before
)

// rule recognises one kind of self-statement. By default its value starts
// where the match ends and it makes one operation op (OpSet when empty) on
// key with it; emit replaces all of that.
type rule struct {
	re *regexp.Regexp
	// lits are literals, case-folded (foldCase), one of which every match
	// of re holds (nil for none): a clause without any is not matched
	// against re (ruleItems).
	lits []string
	key  string
	op   FactOp
	kind ruleKind
	list listMode
	// keyFromGroup builds the key from the first submatch.
	keyFromGroup func(group string) string
	// anymore says the rule applies only when the clause says the
	// statement no longer holds ("anymore", "any longer"); notAnymore only
	// when it does not.
	anymore, notAnymore bool
	// capitalised: the value must start with a capital letter ("I'm
	// called Ana"; "I'm called to testify" names no one).
	capitalised bool
	// removeFrom: each value is also removed from this list key ("I love
	// X" takes X out of dislikes).
	removeFrom string
	// then are operations the statement makes besides its value's ("I
	// sold my car"); a rule without key makes only these.
	then []ruleOp
	// emit makes the operations from the submatches, the rest of the
	// clause and the rest of the sentence (which runs on over commas).
	emit func(sub []string, rest, sentence string, ts time.Time) []ruleOp
}

// im matches "I'm", "I’m", "Im" and "I am".
const im = `\bi(?:['’]?m|\s+am)\s+`

// Word alternations shared by several statements.
const (
	dietWords = `(vegetarian|vegan|pescatarian|pescetarian|flexitarian|keto|paleo)`
	species   = `dog|cat|puppy|kitten|rabbit|bunny|hamster|guinea\s+pig|parrot|budgie|bird|horse|pony|turtle|tortoise|snake|ferret|lizard|gecko|goldfish|fish`
	people    = `daughter|son|kid|child|sister|brother|wife|husband|partner|girlfriend|boyfriend|fianc[ée]e?`
	relAdj    = `(?:(late|little|baby|older|younger|elder|eldest|oldest|youngest|big|twin|old|new|sweet|beloved)\s+)?`
	dont      = `(?:don['’]?t|do\s+not)`
	dontBare  = `don['’]?t|do\s+not`
	// wordEnd ends a word that must not go on with a hyphen ("vegan-friendly").
	wordEnd = `(?:$|[^\w-])`
)

// newRuleTable compiles the statements Rules recognises, in no particular
// order (operations are ordered by position in the message).
func newRuleTable() []rule {
	re := func(s string) *regexp.Regexp { return regexp.MustCompile(`(?i)` + s) }
	return []rule{
		// Names.
		{key: "name", re: re(`\bmy\s+name\s+is\s+`), kind: kindName},
		{key: "name", re: re(im + `called\s+`), kind: kindName, capitalised: true},
		{key: "preferred_name", re: re(`\b(?:please\s+)?call\s+me\s+`), kind: kindCallMe},
		{key: keyMeant, re: re(`\bi\s+mean[t]?\s+`), kind: kindPlain},

		// Where.
		// Not "we": a team "lives in Slack" and "moved to Kubernetes".
		{key: "location", re: re(`\bi\s+(?:(?:now|still|currently)\s+)?live\s+in\s+`), kind: kindPlace},
		{key: "location", re: re(im + `(?:living|based)\s+in\s+`), kind: kindPlace},
		{key: "location", re: re(`\bi(?:\s+(?:have|just|recently|finally|eventually)|['’]ve)*\s+moved\s+(?:back\s+)?(?:from\s+[^,.;!?]{1,60}?\s+)?to\s+`), kind: kindPlace},
		{key: "location", op: OpDelete, re: re(`\bi\s+no\s+longer\s+live\s+in\s+`), kind: kindPlace},
		{key: "location", op: OpDelete, re: re(`\bi\s+` + dont + `\s+live\s+in\s+`), kind: kindPlace, anymore: true},
		{key: "location", op: OpDelete, re: re(im + `no\s+longer\s+(?:living|based)\s+in\s+`), kind: kindPlace},
		{key: "location", op: OpDelete, re: re(im + `not\s+(?:living|based)\s+in\s+`), kind: kindPlace, anymore: true},
		{key: "location", op: OpDelete, re: re(`\bi(?:\s+(?:have|just|recently|finally|eventually)|['’]ve)*\s+moved\s+(?:away\s+from|out\s+of|from)\s+`), kind: kindPlace},
		{key: "hometown", re: re(im + `(?:originally\s+)?from\s+`), kind: kindPlace},
		{key: "hometown", re: re(`\bi\s+grew\s+up\s+in\s+`), kind: kindPlace},

		// Work and education.
		{key: "employer", re: re(`\bi\s+work\s+(?:at|for)\s+`), kind: kindEmployer},
		{key: "employer", re: re(im + `(?:working\s+(?:at|for)|employed\s+(?:at|by))\s+`), kind: kindEmployer},
		{re: re(`\bi\s+work\s+as\s+(an?\s+)?`), kind: kindOccupation, emit: occupation},
		{re: re(im + `working\s+as\s+(an?\s+)?`), kind: kindOccupation, emit: occupation},
		{key: "employer", op: OpDelete, re: re(`\bi\s+no\s+longer\s+work\s+(?:at|for)\s+`), kind: kindEmployer},
		{key: "employer", op: OpDelete, re: re(`\bi\s+` + dont + `\s+work\s+(?:at|for)\s+`), kind: kindEmployer, anymore: true},
		{key: "employer", op: OpDelete, re: re(im + `no\s+longer\s+(?:working\s+(?:at|for)|employed\s+(?:at|by))\s+`), kind: kindEmployer},
		{re: re(`\bi\s+(?:just\s+|recently\s+|finally\s+)?(?:quit|left|lost)\s+my\s+(?:old\s+)?job\b(\s+(?:at|with)\s+)?`), emit: quitJob},
		{re: re(`\bi\s+(?:just\s+|recently\s+)?(?:got|was|have\s+been|['’]ve\s+been)\s+(?:fired|laid\s+off|let\s+go|made\s+redundant)\b`), emit: quitJob},
		{re: re(im + `(?:currently\s+|now\s+)?(?:unemployed|out\s+of\s+work|between\s+jobs|jobless)\b`), emit: quitJob},
		{re: re(`(?:` + im + `(?:now\s+|recently\s+)?|\bi\s+(?:just\s+|recently\s+|finally\s+)?)retired\b`), emit: retired},
		{key: "education", re: re(`\bi\s+(?:just\s+|recently\s+)?graduated\s+from\s+`), kind: kindEmployer},
		{key: "education", re: re(`(?:\bi\s+(?:study|studied)|` + im + `studying)\s+at\s+`), kind: kindEmployer},
		{key: "education", re: re(im + `an?\s+student\s+at\s+`), kind: kindEmployer},

		// Food and health.
		{key: "allergies", op: OpAdd, re: re(im + `(?:also\s+)?(?:(?:very|severely|highly|mildly|deathly|quite)\s+)?allergic\s+to\s+`), kind: kindThing, list: listItemsAnd},
		{key: "allergies", op: OpAdd, re: re(`\bi\s+(?:also\s+)?have\s+(?:an?\s+)?(?:severe\s+|mild\s+)?allerg(?:y|ies)\s+to\s+`), kind: kindThing, list: listItemsAnd},
		{re: re(`\bi\s+(?:also\s+)?have\s+an?\s+(?:severe\s+|mild\s+|bad\s+)?([a-z]+(?:\s+[a-z]+)?)\s+allergy\b`), emit: groupOp(OpAdd, "allergies")},
		{key: "allergies", op: OpRemove, re: re(im + `no\s+longer\s+allergic\s+to\s+`), kind: kindThing, list: listItemsAnd},
		{key: "allergies", op: OpRemove, re: re(im + `not\s+allergic\s+to\s+`), kind: kindThing, list: listItemsAnd, anymore: true},
		{re: re(`\bi(?:['’]ve|\s+have)?\s+outgr(?:ew|own)\s+my\s+([a-z]+(?:\s+[a-z]+)?)\s+allergy\b`), emit: groupOp(OpRemove, "allergies")},
		{re: re(im + `(?:now\s+|also\s+|strictly\s+|fully\s+)?(?:an?\s+)?(?:strict\s+)?` + dietWords + wordEnd), emit: diet(OpSet)},
		{re: re(`\bi(?:['’]ve|\s+have)?\s+(?:just\s+|recently\s+)?(?:went|gone|became|become|turned)\s+(?:fully\s+)?` + dietWords + wordEnd), emit: diet(OpSet)},
		{re: re(`(?:` + im + `on|\bi\s+(?:follow|eat))\s+an?\s+(?:strict\s+)?` + dietWords + `\s+diet\b`), emit: diet(OpSet)},
		{re: re(im + `no\s+longer\s+(?:an?\s+)?` + dietWords + wordEnd), emit: diet(OpDelete)},
		{re: re(im + `not\s+(?:an?\s+)?` + dietWords + wordEnd), emit: diet(OpDelete), anymore: true},
		{re: re(`\bi\s+(?:stopped|quit)\s+being\s+(?:an?\s+)?` + dietWords + wordEnd), emit: diet(OpDelete)},
		{re: re(`\bi\s+used\s+to\s+be\s+(?:an?\s+)?` + dietWords + wordEnd), emit: diet(OpDelete)},
		{re: re(im + `(?:also\s+)?(lactose|gluten)[-\s]+intolerant\b`), emit: groupOp(OpAdd, "dietary_restrictions")},
		{re: re(im + `(?:also\s+)?(?:celiac|coeliac)\b`), emit: fixedOp(OpAdd, "dietary_restrictions", "gluten")},
		{re: re(`\bi\s+(?:also\s+)?(?:` + dontBare + `|never)\s+(?:eat|drink)\s+(red\s+meat|meat|pork|beef|chicken|fish|seafood|dairy|eggs|gluten|wheat|sugar|alcohol)\b`),
			emit: groupOp(OpAdd, "dietary_restrictions")},

		// Languages.
		{key: "languages", op: OpAdd, re: re(`\bi\s+(?:also\s+|now\s+)?(?:can\s+(?:also\s+)?)?speak\s+`), kind: kindLanguage, list: listItemsAnd},
		{key: "languages", op: OpAdd, re: re(im + `(?:also\s+)?fluent\s+in\s+`), kind: kindLanguage, list: listItemsAnd},
		{key: "languages", op: OpRemove, re: re(`\bi\s+(?:can\s+)?no\s+longer\s+speak\s+`), kind: kindLanguage, list: listItemsAnd},
		{key: "languages", op: OpRemove, re: re(`\bi\s+` + dont + `\s+speak\s+`), kind: kindLanguage, list: listItemsAnd, anymore: true},
		{key: "native_language", re: re(`\bmy\s+(?:native|first|mother)\s+(?:language|tongue)\s+is\s+`), kind: kindShort},

		// People and animals.
		{re: re(`\bmy\s+` + relAdj + `(` + species + `|` + people + `)(?:['’]s\s+name\s+is|\s+is\s+(?:named|called)|\s+(?:named|called))\s+`), emit: relation(false)},
		{re: re(`\bmy\s+` + relAdj + `(` + species + `|` + people + `),?\s+`), emit: relation(true)},
		{re: re(`\b(?:i|we)\s+(?:also\s+|now\s+|just\s+)?(?:have|got|adopted|rescued|own)\s+an?\s+` + relAdj + `(` + species + `|daughter|son|sister|brother|kid)\s+(?:named|called)\s+`), emit: relation(false)},
		{re: re(`\bmy\s+(?:two\s+|three\s+|four\s+)?(?:kids|children)(?:['’]s\s+names\s+are|\s+are\s+(?:named|called)|\s+are)\s+`), emit: children},
		{re: re(im + `(?:happily\s+)?married\s+to\s+`), emit: marriedTo},
		{re: re(im + `(?:happily\s+|recently\s+|now\s+|newly\s+)?(married|single|divorced|engaged|widowed|separated)` + wordEnd), emit: status},
		{re: re(`\bi\s+(?:just\s+|recently\s+)?got\s+(married|engaged|divorced)\b`), emit: status},
		{re: re(`\b(?:i|we)\s+(?:just\s+|recently\s+)?(?:broke|split)\s+up\b`), emit: fixedOp(OpDelete, "partner", "")},

		// Tastes and pursuits.
		{key: "likes", op: OpAdd, removeFrom: "dislikes", re: re(`\bi\s+(?:really\s+|also\s+|absolutely\s+|just\s+)?(?:like|love|enjoy|adore)\s+`), kind: kindLiked, list: listItems},
		{key: "dislikes", op: OpAdd, removeFrom: "likes", re: re(`\bi\s+(?:really\s+|also\s+|absolutely\s+)?(?:hate|dislike|detest|can['’]?t\s+stand|cannot\s+stand|` + dont + `\s+(?:really\s+)?like)\s+`), kind: kindLiked, list: listItems, notAnymore: true},
		{key: "likes", op: OpRemove, re: re(`\bi\s+no\s+longer\s+(?:like|love|enjoy)\s+`), kind: kindLiked, list: listItems},
		{key: "likes", op: OpRemove, re: re(`\bi\s+` + dont + `\s+(?:like|love|enjoy)\s+`), kind: kindLiked, list: listItems, anymore: true},
		{key: "hobbies", re: re(`\bmy\s+(?:favou?rite\s+|main\s+)?hobbies\s+are\s+`), kind: kindThing, list: listItemsAnd},
		{key: "hobbies", op: OpAdd, re: re(`\b(?:my\s+(?:favou?rite\s+|main\s+|new\s+)?hobby\s+is|one\s+of\s+my\s+hobbies\s+is)\s+`), kind: kindThing},
		{key: "hobbies", op: OpAdd, re: re(`\bi\s+(?:also\s+|now\s+)?play\s+`), kind: kindThing},
		{key: "hobbies", op: OpRemove, re: re(`\bi\s+(?:stopped|quit|gave\s+up)\s+playing\s+`), kind: kindThing},
		{key: "hobbies", op: OpRemove, re: re(`\bi\s+no\s+longer\s+play\s+`), kind: kindThing},
		{key: "hobbies", op: OpRemove, re: re(`\bi\s+` + dont + `\s+play\s+`), kind: kindThing, anymore: true},
		{key: "goals", op: OpAdd, re: re(`\b(?:my\s+(?:main\s+|big\s+|biggest\s+|new\s+)?goal\s+is|one\s+of\s+my\s+goals\s+is)\s+(?:to\s+)?`), kind: kindThing},
		{
			re:   re(`\bmy\s+(?:all[- ]time\s+)?favou?rite\s+([a-z][a-z -]{0,40}?)\s+(?:is|are)\s+`),
			kind: kindPlain,
			keyFromGroup: func(g string) string {
				if k := events.SnakeKey(g); k != "" && strings.Count(k, "_") < 4 {
					return "favorite_" + britishSpelling.Replace(k)
				}
				return ""
			},
		},
		// One item each: a single "preference" kept only the last said
		// ("I prefer aisle seats" replaced "I prefer tea over coffee").
		{key: "preferences", op: OpAdd, re: re(`\bi\s+(?:really\s+|generally\s+|usually\s+)?prefer\s+`), kind: kindPlain},

		// Things.
		{key: "car", re: re(`\bi\s+(?:now\s+|also\s+)?drive\s+an?\s+`), kind: kindCar},
		{key: "car", re: re(`\bmy\s+(?:new\s+)?car\s+is\s+an?\s+`), kind: kindCar},
		{re: re(`\bi\s+(?:just\s+|recently\s+|finally\s+)?(?:sold|got\s+rid\s+of|gave\s+away|scrapped|totaled|totalled|wrecked)\s+my\s+(?:old\s+)?car\b`), then: []ruleOp{{OpDelete, "car", ""}}},
		{re: re(`\bi\s+(?:no\s+longer|` + dontBare + `)\s+(?:have|own)\s+a\s+car\b`), then: []ruleOp{{OpDelete, "car", ""}}},

		// Dates and ages.
		{re: re(im + `(\d{1,3})((?:\s+|-)?(?:years?|yrs?)(?:(?:\s+|-)?old)?\b)?`), emit: age},
		{re: re(`\bi\s+(just\s+|recently\s+)?turned\s+(\d{1,3})\b`), emit: turned},
		{re: re(`\bi\s+was\s+born\s+in\s+((?:19|20)\d\d)\b`), emit: groupOp(OpSet, "birth_year")},
		{re: re(`\b(?:my\s+(?:birthday|date\s+of\s+birth)\s+is|i\s+was\s+born)\s+(?:on\s+)?`), emit: birthday},

		// Contact and settings.
		{key: "email", re: re(`\bmy\s+e-?mail(?:\s+address)?\s+is\s+`), kind: kindEmail},
		{key: "timezone", re: re(`\bmy\s+time\s*zone\s+is\s+`), kind: kindShort},
		{key: "pronouns", re: re(`\bmy\s+pronouns\s+are\s+`), kind: kindShort},
	}
}

// foundOp is an operation found in the message, at the position of its
// statement.
type foundOp struct {
	pos  int
	kind ruleKind
	ruleOp
}

// ruleItems returns the fact operations stated in the user's text, in the
// order stated, with canonical keys.
func ruleItems(table []rule, text string, ts time.Time) []factItem {
	text, _ = truncateUTF8(text, rulesScanBytes)

	// Past a hypothetical frame or a pasted text, statements are not the
	// user's (rulespeaker.go).
	text = text[:voiceEnd(text)]
	quoted := quoteMask(text)
	var found []foundOp
	forEachSegment(text, func(off int, seg string) {
		// Most clauses state nothing a rule takes: a rule's literal words
		// missing from the clause rule its regexp out for a fraction of
		// the regexp's cost (BenchmarkRulesExtract: 0.9 ms a turn of
		// everyday chat before).
		folded := foldCase(seg)
		for i := range table {
			r := &table[i]
			if r.lits != nil && !containsAny(folded, r.lits) {
				continue
			}
			for _, m := range r.re.FindAllStringSubmatchIndex(seg, -1) {
				if isHypothetical(seg[:m[0]]) || quoted[off+m[0]] {
					continue
				}
				rest, _ := truncateUTF8(seg[m[1]:], rulesValueScanBytes)
				if (r.anymore || r.notAnymore) && anymoreRE.MatchString(rest) != r.anymore {
					continue
				}
				sentence, _ := truncateUTF8(text[off+m[1]:], rulesValueScanBytes)
				for _, o := range r.ops(seg, m, rest, sentence, ts) {
					found = append(found, foundOp{pos: off + m[0], kind: r.kind, ruleOp: o})
				}
			}
		}
	})
	sort.SliceStable(found, func(i, j int) bool { return found[i].pos < found[j].pos })
	return resolveRuleOps(found, ts)
}

// ops returns the operations of one match of r: m are its submatch indexes
// in seg, rest is the clause after it and sentence the sentence after it.
func (r *rule) ops(seg string, m []int, rest, sentence string, ts time.Time) []ruleOp {
	sub := make([]string, len(m)/2)
	for i := range sub {
		if m[2*i] >= 0 {
			sub[i] = seg[m[2*i]:m[2*i+1]]
		}
	}
	if r.emit != nil {
		return r.emit(sub, rest, sentence, ts)
	}
	key := r.key
	if r.keyFromGroup != nil {
		if key = r.keyFromGroup(sub[1]); key == "" {
			return nil
		}
	}
	if key == "" {
		return r.then
	}
	op := r.op
	if op == "" {
		op = OpSet
	}
	var values []string
	switch {
	case key == keyMeant:
		values = []string{rest} // cleaned as the corrected statement's value
	case r.list != oneValue:
		values = listValues(r.kind, r.list, sentence, ts)
	default:
		if v := cleanValue(r.kind, rest, ts); v != "" && (!r.capitalised || startsUpper(v)) {
			values = []string{v}
		}
	}
	if len(values) == 0 {
		return nil // a statement without a plausible value changes nothing
	}
	var out []ruleOp
	for _, v := range values {
		out = append(out, ruleOp{op, key, v})
		if r.removeFrom != "" {
			out = append(out, ruleOp{OpRemove, r.removeFrom, v})
		}
	}
	return append(out, r.then...)
}

// resolveRuleOps turns the operations found, in message order, into
// extractor items: it applies corrections ("I meant X"), turns ages into
// birth years, and drops the delete of a single-valued key that the
// message also sets ("I don't live in Berlin anymore, I moved to Porto").
func resolveRuleOps(found []foundOp, ts time.Time) []factItem {
	// Corrections replace the value of the statement just before them.
	kept := found[:0:0]
	for _, f := range found {
		if f.key != keyMeant {
			kept = append(kept, f)
			continue
		}
		if len(kept) == 0 {
			continue
		}
		prev := kept[len(kept)-1]
		if _, list := events.CanonicalFactKey(prev.key); list || prev.op != OpSet || prev.key[0] == 0 {
			continue
		}
		if v := cleanValue(prev.kind, f.value, ts); v != "" {
			prev.pos, prev.value = f.pos, v
			kept = append(kept, prev)
		}
	}

	var month, day int // the birthday the message gives, if any
	sets := map[string]bool{}
	for _, f := range kept {
		if f.op == OpSet {
			sets[f.key] = true
			if f.key == "birthday" {
				month, day = birthdayMonthDay(f.value)
			}
		}
	}
	var items []factItem
	for _, f := range kept {
		switch f.key {
		case keyAge:
			n, _ := strconv.Atoi(f.value)
			y := ts.Year() - n
			switch {
			case month > 0:
				if int(ts.Month()) < month || int(ts.Month()) == month && ts.Day() < day {
					y--
				}
			case ts.Month() < time.July:
				y--
			}
			f.key, f.value = "birth_year", strconv.Itoa(y)
			sets["birth_year"] = true
		}
		if _, list := events.CanonicalFactKey(f.key); f.op == OpDelete && !list && sets[f.key] {
			continue
		}
		items = append(items, factItem{Op: f.op, Key: f.key, Value: f.value})
	}
	return items
}

// anymoreRE finds what makes a negation say that something stopped being
// true: "not vegetarian anymore", "don't live there any longer".
var anymoreRE = regexp.MustCompile(`(?i)\bany\s*(?:more|longer)\b|\bno\s+more\b`)

// The emit functions of statements whose operations are not one value after
// the match.

// groupOp makes op on key with the first submatch as the value.
func groupOp(op FactOp, key string) func([]string, string, string, time.Time) []ruleOp {
	return func(sub []string, _, _ string, _ time.Time) []ruleOp {
		v := strings.ToLower(strings.Join(strings.Fields(sub[1]), " "))
		if isBadLeadThing(strings.Fields(v)[0]) {
			return nil
		}
		return []ruleOp{{op, key, v}}
	}
}

// fixedOp makes one fixed operation.
func fixedOp(op FactOp, key, value string) func([]string, string, string, time.Time) []ruleOp {
	return func([]string, string, string, time.Time) []ruleOp { return []ruleOp{{op, key, value}} }
}

// diet sets or deletes diet with the diet word of the first submatch.
func diet(op FactOp) func([]string, string, string, time.Time) []ruleOp {
	return func(sub []string, _, _ string, _ time.Time) []ruleOp {
		v := strings.ToLower(sub[1])
		if v == "pescetarian" {
			v = "pescatarian"
		}
		return []ruleOp{{op, "diet", v}}
	}
}

// quitJob: the user has no job now ("I quit my job at Acme").
func quitJob(sub []string, rest, _ string, ts time.Time) []ruleOp {
	employer := ""
	if len(sub) > 1 && sub[1] != "" {
		employer = cleanValue(kindEmployer, rest, ts)
	}
	return []ruleOp{{OpDelete, "occupation", ""}, {OpDelete, "employer", employer}}
}

// retired: "I'm retired", "I retired last year"; not "I retired my laptop".
func retired(_ []string, rest, _ string, _ time.Time) []ruleOp {
	switch w := firstWord(rest); w {
	case "", "from", "in", "last", "this", "and", "but", "so", "early", "recently", "ago", "after", "at", "now", "already", "since", "two", "three", "five", "ten", "years", "btw", "too", "lol":
		return []ruleOp{{OpSet, "occupation", "retired"}, {OpDelete, "employer", ""}}
	}
	return nil
}

// occupation: "I work as a nurse", "I work as nurse"; not a comparison ("I
// work as hard as I can") or a manner ("as part of a team").
func occupation(sub []string, rest, _ string, ts time.Time) []ruleOp {
	if sub[1] == "" && (comparisonRE.MatchString(rest) || isMannerLead(firstWord(rest))) {
		return nil
	}
	v := cleanValue(kindOccupation, rest, ts)
	if v == "" {
		return nil
	}
	return []ruleOp{{OpSet, "occupation", v}}
}

// comparisonRE finds "as ... as" after "I work as": "hard as I can", "much
// as possible".
var comparisonRE = regexp.MustCompile(`(?i)^\s*[\w-]+\s+as\b`)

// isMannerLead reports whether w, right after "I work as" without an
// article, starts a manner rather than a job.
func isMannerLead(w string) bool {
	switch w {
	case "part", "much", "many", "hard", "long", "fast", "well", "best", "usual", "always", "such", "one", "if", "though", "soon", "little", "often", "quickly", "efficiently", "needed", "required", "promised", "agreed":
		return true
	}
	return false
}

// status sets relationship_status; being single, divorced, widowed or
// separated also means no partner. "Married to" or "engaged to" must name a
// person ("married to my work" is a figure of speech).
func status(sub []string, rest, _ string, _ time.Time) []ruleOp {
	v := strings.ToLower(sub[1])
	if (v == "married" || v == "engaged") && firstWord(rest) == "to" && !isSpouse(strings.Fields(rest)[1:]) {
		return nil
	}
	ops := []ruleOp{{OpSet, "relationship_status", v}}
	switch v {
	case "single", "divorced", "widowed", "separated":
		ops = append(ops, ruleOp{OpDelete, "partner", ""})
	}
	return ops
}

// children: "my kids are Mia and Leo"; each a capitalised name ("my kids
// are awesome" is not a list of names).
func children(_ []string, _, sentence string, ts time.Time) []ruleOp {
	var ops []ruleOp
	for _, name := range listValues(kindName, listItemsAnd, sentence, ts) {
		if r, _ := utf8.DecodeRuneInString(name); !unicode.IsUpper(r) || strings.Contains(name, " ") {
			return nil
		}
		ops = append(ops, ruleOp{OpAdd, "children", name})
	}
	return ops
}

// isSpouse reports whether words, after "married to", are a person: a name
// ("Ana", "my Ana") or a person described ("a wonderful man", "my high
// school sweetheart").
func isSpouse(words []string) bool {
	for i, w := range words {
		if i == 4 {
			break
		}
		nw := normWord(w)
		if i == 0 {
			switch nw {
			case "a", "an", "him", "her", "them", "be":
				return true // "a doctor", "him", "engaged to be married"
			case "my", "the":
				continue
			}
		}
		if startsUpper(w) {
			return true
		}
		switch nw {
		case "man", "woman", "guy", "girl", "gal", "lady", "gentleman", "person", "partner", "sweetheart", "love", "wife",
			"husband", "spouse", "fiance", "fiancé", "fiancee", "fiancée", "boyfriend", "girlfriend", "friend", "soulmate":
			return true
		}
	}
	return false
}

// marriedTo: "I'm married to Ana".
func marriedTo(_ []string, rest, _ string, ts time.Time) []ruleOp {
	name := cleanValue(kindName, rest, ts)
	if name == "" {
		return nil
	}
	return []ruleOp{{OpSet, "relationship_status", "married"}, {OpSet, "partner", name + " (spouse)"}}
}

// nameEndRE finds the end of a name that the words after it would make
// implausible.
var nameEndRE = regexp.MustCompile(`(?i)\s+(?:and|&|or|who|which|that|is|was|has)\b`)

// deathRE finds, right after a person's or pet's name, that they are gone.
var deathRE = regexp.MustCompile(`(?i)^\s*,?\s*(?:just\s+|recently\s+|sadly\s+|has\s+|have\s+)?(?:died|passed(?:\s+away)?|was\s+put\s+down|ran\s+away|is\s+dead|got\s+run\s+over)\b`)

// relation adds a pet, a child or a sibling, or sets the partner, from "my
// dog Rex", "my daughter's name is Mia", "I have a son named Leo"; a death
// ("my dog Rex died", "my late husband Tom") removes them. bare says the
// name follows the relation directly ("my dog Rex"), and must then be one
// capitalised word.
func relation(bare bool) func([]string, string, string, time.Time) []ruleOp {
	return func(sub []string, rest, _ string, ts time.Time) []ruleOp {
		adj, rel := strings.ToLower(sub[1]), strings.ToLower(strings.Join(strings.Fields(sub[2]), " "))
		var name, after string
		if bare {
			name, after = capitalisedName(rest)
		} else {
			// "a cat named Tom and a dog named Rex": the name ends at "and".
			if loc := nameEndRE.FindStringIndex(rest); loc != nil {
				rest = rest[:loc[0]]
			}
			name = cleanValue(kindName, rest, ts)
		}
		if name == "" {
			return nil
		}
		gone := adj == "late" || deathRE.MatchString(after)
		key, value := "", name+" ("+rel+")"
		switch rel {
		case "daughter", "son":
			key = "children"
		case "kid", "child":
			key, value = "children", name
		case "sister", "brother":
			key = "siblings"
		case "partner":
			key, value = "partner", name
		case "wife", "husband", "girlfriend", "boyfriend", "fiance", "fiancé", "fiancee", "fiancée":
			key = "partner"
		default:
			switch rel {
			case "puppy":
				rel = "dog"
			case "kitten":
				rel = "cat"
			case "bunny":
				rel = "rabbit"
			}
			key, value = "pets", name+" ("+rel+")"
		}
		_, list := events.CanonicalFactKey(key)
		switch {
		case gone && list:
			return []ruleOp{{OpRemove, key, value}}
		case gone:
			return []ruleOp{{OpDelete, key, value}}
		case list:
			return []ruleOp{{OpAdd, key, value}}
		}
		return []ruleOp{{OpSet, key, value}}
	}
}

// age: "I'm 34", "I'm 34 years old"; not "I'm 5 minutes late".
func age(sub []string, rest, _ string, ts time.Time) []ruleOp {
	if ts.IsZero() {
		return nil
	}
	if sub[2] == "" {
		switch firstWord(rest) {
		case "", "and", "but", "so", "now", "btw", "lol", "haha", "too", "already", "today", "this", "next", "soon", "though", "tho", "actually", "myself":
		default:
			return nil
		}
	}
	n, err := strconv.Atoi(sub[1])
	if err != nil || n < 1 || n > 120 {
		return nil
	}
	return []ruleOp{{OpSet, keyAge, strconv.Itoa(n)}}
}

// turned: "I just turned 40", "I turned 40 last week" (the birthday is
// just past: the turn's year minus N), "I turned 40 in December" (past
// this year when December is not after the turn's month, else last year);
// without a time it is only an age.
func turned(sub []string, rest, _ string, ts time.Time) []ruleOp {
	n, err := strconv.Atoi(sub[2])
	if ts.IsZero() || err != nil || n < 1 || n > 120 {
		return nil
	}
	year := ts.Year() - n
	switch m := turnedWhenRE.FindStringSubmatch(rest); {
	case m == nil && sub[1] == "":
		return []ruleOp{{OpSet, keyAge, strconv.Itoa(n)}}
	case m != nil && m[1] != "":
		if monthNumber(strings.ToLower(m[1])) > int(ts.Month()) {
			year--
		}
	}
	return []ruleOp{{OpSet, "birth_year", strconv.Itoa(year)}}
}

// turnedWhenRE reads when an age was reached, right after "I turned N": a
// month (its first submatch), or a time in the last weeks.
var turnedWhenRE = regexp.MustCompile(`(?i)^\s+(?:(?:last|in|this\s+past)\s+` + monthNames + `\b|(?:today|yesterday|recently|earlier\s+this\s+(?:week|month)|this\s+(?:week|month)|last\s+(?:week|weekend|night|month)|on\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(?:a\s+few|\d+|a|one|two|three)\s+(?:days?|weeks?)\s+ago)\b)`)

// birthday: "my birthday is March 3rd", "I was born on 3 March 1990".
func birthday(_ []string, _, sentence string, ts time.Time) []ruleOp {
	v := cleanValue(kindBirthday, sentence, ts)
	if v == "" {
		return nil
	}
	return []ruleOp{{OpSet, "birthday", v}}
}

// firstWord returns the first word of s, normalised.
func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return normWord(f[0])
}

// capitalisedName returns the capitalised one-word name at the start of s
// ("Rex", "Mia's" gives "Mia") and the text after it.
func capitalisedName(s string) (name, after string) {
	s = strings.TrimLeft(s, " \t")
	end := strings.IndexFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\'' && r != '’' && r != '-'
	})
	if end < 0 {
		end = len(s)
	}
	word, after := s[:end], s[end:]
	for _, poss := range []string{"'s", "’s", "'", "’"} {
		word = strings.TrimSuffix(word, poss)
	}
	r, _ := utf8.DecodeRuneInString(word)
	if word == "" || !unicode.IsUpper(r) || !isNameLike([]string{word}) {
		return "", ""
	}
	switch w := strings.ToLower(word); {
	case w == "mr" || w == "mrs" || w == "ms" || w == "dr" || w == "miss" || w == "sir":
		return "", "" // "my cat Mr. Whiskers": more than one word
	case w == "i" || isBadLeadName(w) || isClauseStarter(w) || isHypotheticalWord(w):
		return "", ""
	}
	return word, after
}
