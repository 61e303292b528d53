package extractor

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memoryd/memoryd/events"
)

// snakeKeyRE is what every fact key must look like.
var snakeKeyRE = regexp.MustCompile(`^[a-z0-9]+(?:_[a-z0-9]+)*$`)

var testTurnTime = time.Date(2024, 3, 15, 9, 30, 0, 0, time.FixedZone("CET", 3600))

// rulesCase is one row of TestRulesFacts.
type rulesCase struct {
	name      string
	user      string
	assistant string
	ts        time.Time // testTurnTime (2024-03-15) when zero, unless noTime
	noTime    bool
	want      map[string]string
	changes   []FactChange
}

// extract runs r on the row's turn.
func (c rulesCase) extract(r *Rules) (Result, error) {
	ts := testTurnTime
	if !c.ts.IsZero() {
		ts = c.ts
	}
	if c.noTime {
		ts = time.Time{}
	}
	return r.Extract(context.Background(), Input{
		UserID: "u1",
		Turn:   Turn{EventID: "e1", UserMessage: c.user, AssistantResponse: c.assistant, Timestamp: ts},
	})
}

// rulesCases are every statement the rules recognise, and the near misses
// (negations, hypotheticals, other people, implausible values) that must
// store nothing, with the facts set and the other changes.
func rulesCases() []rulesCase {
	add := func(k, v string) FactChange { return FactChange{Op: OpAdd, Key: k, Value: v} }
	rm := func(k, v string) FactChange { return FactChange{Op: OpRemove, Key: k, Value: v} }
	del := func(k, v string) FactChange { return FactChange{Op: OpDelete, Key: k, Value: v} }
	like := func(v string) []FactChange { return []FactChange{add("likes", v), rm("dislikes", v)} }
	july := time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)
	none := map[string]string{}

	return []rulesCase{
		// Names.
		{name: "name", user: "Hi, my name is Ana.", want: map[string]string{"name": "Ana"}},
		{name: "name keeps case", user: "MY NAME IS ana maria", want: map[string]string{"name": "ana maria"}},
		{name: "name full", user: "My name is Ana Maria da Silva btw", want: map[string]string{"name": "Ana Maria da Silva"}},
		{name: "name with filler", user: "my name is actually Zoë", want: map[string]string{"name": "Zoë"}},
		{name: "called", user: "I'm called Jean-Luc!", want: map[string]string{"name": "Jean-Luc"}},
		{name: "called curly apostrophe", user: "I’m called O'Brien", want: map[string]string{"name": "O'Brien"}},
		{name: "call me", user: "Please call me Jack.", want: map[string]string{"preferred_name": "Jack"}},
		{name: "you can call me", user: "you can call me Al", want: map[string]string{"preferred_name": "Al"}},
		{name: "correction later wins", user: "My name is Ana. Actually, my name is Anna.", want: map[string]string{"name": "Anna"}},
		{name: "later wins across rules", user: "I'm called Bo, well my name is Bob", want: map[string]string{"name": "Bob"}},
		{name: "I meant corrects the statement before", user: "I live in Lisbon, sorry, I meant Porto", want: map[string]string{"location": "Porto"}},
		{name: "I meant needs a statement before", user: "I meant Porto", want: none},
		{name: "I meant an implausible value", user: "My name is Ana, I mean it", want: map[string]string{"name": "Ana"}},

		// Where.
		{name: "live in", user: "I live in Lisbon with my husband", want: map[string]string{"location": "Lisbon"}},
		{name: "live in multiword", user: "i live in New York City now", want: map[string]string{"location": "New York City"}},
		{name: "moved to", user: "I moved to Berlin 3 years ago and I love it", want: map[string]string{"location": "Berlin"}},
		{name: "moved back to", user: "I moved back to Lisbon", want: map[string]string{"location": "Lisbon"}},
		{name: "moved from to", user: "I moved from Toronto to Lisbon last year", want: map[string]string{"location": "Lisbon"}},
		{name: "based in", user: "I am based in São Paulo.", want: map[string]string{"location": "São Paulo"}},
		// Adverbs before "moved" and "live"; "we" is not the user alone
		// (a team "moved to Kubernetes"), and "I prefer something ..." is
		// a reply to what came before (a time walk's month of chats).
		{name: "finally moved", user: "I finally moved to Berlin!", want: map[string]string{"location": "Berlin"}},
		{name: "now live in", user: "I now live in Porto", want: map[string]string{"location": "Porto"}},
		{name: "we moved", user: "We moved to Kubernetes last year", want: none},
		{name: "prefer something", user: "I prefer something less sad this time.", want: none},
		{name: "prefer this one", user: "I prefer this one", want: none},
		// An emoji ends a value: chat messages end in them.
		{name: "emoji after a place", user: "I live in Braga 😊", want: map[string]string{"location": "Braga"}},
		{name: "emoji after a name", user: "My name is Zoë 👋 and I live in Braga 🚀", want: map[string]string{"name": "Zoë", "location": "Braga"}},
		{name: "emoji after a job", user: "I work as a nurse 🙂", want: map[string]string{"occupation": "nurse"}},
		{name: "emoji with a selector and a joiner", user: "I'm allergic to cats ❤️ and I live in Porto 👨‍👩‍👧", want: map[string]string{"location": "Porto"},
			changes: []FactChange{add("allergies", "cats")}},
		{name: "emoji before a place", user: "I live in 🇵🇹 Lisbon", want: map[string]string{"location": "Lisbon"}},
		{name: "registered sign in a name", user: "I work at Acme® Corp", want: map[string]string{"employer": "Acme® Corp"}},
		// A dot after a short form before a name ends no sentence; "St"
		// was stored as the city. A dotted short form keeps its last dot.
		{name: "short form before a name", user: "I live in St. Louis. My name is Ana.", want: map[string]string{"location": "St. Louis", "name": "Ana"}},
		{name: "short forms of places", user: "I grew up in Ft. Worth and I moved to Mt. Pleasant", want: map[string]string{"hometown": "Ft. Worth", "location": "Mt. Pleasant"}},
		{name: "title before a name", user: "My name is Dr. Silva.", want: map[string]string{"name": "Dr. Silva"}},
		{name: "short form ending a sentence", user: "I live near the Mt. I work as a nurse.", want: map[string]string{"occupation": "nurse"}},
		{name: "dotted short form", user: "I live in Washington D.C. My name is Ana.", want: map[string]string{"location": "Washington D.C.", "name": "Ana"}},
		{name: "dotted short form at the end", user: "i moved to the U.K.", want: map[string]string{"location": "the U.K."}},
		// "Jr." and "Sr." after a name end it: a sentence starting with a
		// capital after them is no part of it. Nor is one starting "I"
		// after a title: "Dr. I live" is no name.
		{name: "suffix ending a name", user: "My name is John Smith Jr. I live in Boston.", want: map[string]string{"name": "John Smith Jr", "location": "Boston"}},
		{name: "senior ending a name", user: "My name is Ana Sr. Nice to meet you.", want: map[string]string{"name": "Ana Sr"}},
		{name: "short form before I", user: "My name is Dr. I live in Porto.", want: map[string]string{"name": "Dr", "location": "Porto"}},
		{name: "from is hometown", user: "I'm from Porto, where do you live?", want: map[string]string{"hometown": "Porto"}},
		{name: "grew up in", user: "I grew up in Braga", want: map[string]string{"hometown": "Braga"}},
		{name: "no longer live in", user: "I no longer live in Berlin.", want: none, changes: []FactChange{del("location", "Berlin")}},
		{name: "don't live in anymore", user: "I don't live in Berlin anymore", want: none, changes: []FactChange{del("location", "Berlin")}},
		{name: "moved away from", user: "I moved away from Berlin", want: none, changes: []FactChange{del("location", "Berlin")}},
		{name: "no longer living in", user: "I'm no longer living in Berlin", want: none, changes: []FactChange{del("location", "Berlin")}},
		{name: "not based in anymore", user: "I'm not based in London anymore", want: none, changes: []FactChange{del("location", "London")}},
		{name: "delete and a new place is a set", user: "I don't live in Berlin anymore, I moved to Porto", want: map[string]string{"location": "Porto"}},
		{name: "new place then delete is a set", user: "I moved to Porto and I don't live in Berlin any more", want: map[string]string{"location": "Porto"}},
		{name: "negated live in", user: "I don't live in Paris and I'm not from here", want: none},
		{name: "imagine I live", user: "imagine I live in Paris", want: none},
		{name: "hypothetical several words back", user: "if one day I live in Paris I'll learn French", want: none},
		{name: "let's say", user: "Let's say I live in Tokyo", want: none},
		{name: "a story", user: "I'm writing a story where I live in Paris", want: none},
		{name: "quoted speech", user: "she said 'I live in Rome'", want: none},
		{name: "double quoted speech", user: `my friend wrote "I live in Rome"`, want: none},
		{name: "other person lives", user: "My sister lives in Paris", want: none},

		// Work and education.
		{name: "work at", user: "I work at Bed Bath and Beyond as a manager", want: map[string]string{"employer": "Bed Bath and Beyond"}},
		{name: "work for", user: "I work for the Center for Disease Control", want: map[string]string{"employer": "the Center for Disease Control"}},
		{name: "employer sentence end", user: "I'm working at Acme Inc. in Berlin", want: map[string]string{"employer": "Acme Inc"}},
		{name: "work as", user: "I work as a software engineer at Google", want: map[string]string{"occupation": "software engineer"}},
		{name: "working as", user: "I'm working as a nurse at St Mary's", want: map[string]string{"occupation": "nurse"}},
		{name: "no longer employed by", user: "I'm no longer employed by Acme", want: none, changes: []FactChange{del("employer", "Acme")}},
		{name: "unemployed", user: "I'm unemployed at the moment", want: none, changes: []FactChange{del("occupation", ""), del("employer", "")}},
		{name: "study at", user: "I study at the University of Porto", want: map[string]string{"education": "the University of Porto"}},
		{name: "student at", user: "I'm a student at Nova", want: map[string]string{"education": "Nova"}},
		{name: "quit my job", user: "I quit my job at Acme", want: none, changes: []FactChange{del("occupation", ""), del("employer", "Acme")}},
		{name: "quit and a new employer", user: "I quit my job at Acme and now I work at Globex", want: map[string]string{"employer": "Globex"},
			changes: []FactChange{del("occupation", "")}},
		{name: "laid off", user: "I got laid off last week", want: none, changes: []FactChange{del("occupation", ""), del("employer", "")}},
		{name: "no longer work at", user: "I no longer work at Google", want: none, changes: []FactChange{del("employer", "Google")}},
		{name: "don't work for anymore", user: "I don't work for Acme anymore", want: none, changes: []FactChange{del("employer", "Acme")}},
		{name: "don't work for is no change", user: "I don't work for Acme, I'm a freelancer", want: none},
		{name: "retired", user: "I'm retired now", want: map[string]string{"occupation": "retired"}, changes: []FactChange{del("employer", "")}},
		{name: "retired a laptop", user: "I retired my old laptop", want: none},
		{name: "graduated from", user: "I graduated from MIT in 2015", want: map[string]string{"education": "MIT"}},
		{name: "work for myself", user: "I work for myself", want: none},
		{name: "work at night", user: "I work at night", want: none},

		// Food and health.
		{name: "allergies and", user: "I'm allergic to peanuts and shellfish", want: none,
			changes: []FactChange{add("allergies", "peanuts"), add("allergies", "shellfish")}},
		{name: "allergies also over commas", user: "I'm also allergic to shellfish, eggs, and soy.", want: none,
			changes: []FactChange{add("allergies", "shellfish"), add("allergies", "eggs"), add("allergies", "soy")}},
		{name: "allergies end at a new clause", user: "I'm allergic to cats, but I love dogs", want: none,
			changes: append([]FactChange{add("allergies", "cats")}, like("dogs")...)},
		{name: "an allergy", user: "I have a severe peanut allergy", want: none, changes: []FactChange{add("allergies", "peanut")}},
		{name: "an allergy to", user: "I have an allergy to latex", want: none, changes: []FactChange{add("allergies", "latex")}},
		{name: "no longer allergic", user: "I'm no longer allergic to penicillin", want: none, changes: []FactChange{rm("allergies", "penicillin")}},
		{name: "not allergic anymore", user: "I'm not allergic to cats anymore", want: none, changes: []FactChange{rm("allergies", "cats")}},
		{name: "outgrew an allergy", user: "I outgrew my milk allergy", want: none, changes: []FactChange{rm("allergies", "milk")}},
		{name: "allergy added then removed", user: "I'm allergic to peanuts. Actually I'm not allergic to peanuts anymore",
			want: none, changes: []FactChange{rm("allergies", "peanuts")}},
		{name: "not allergic is no change", user: "I'm not allergic to cats", want: none},
		{name: "allergy named with a short form", user: "I'm allergic to St. John's wort.", want: none,
			changes: []FactChange{add("allergies", "St. John's wort")}},
		{name: "friend allergic", user: "my friend is allergic to peanuts", want: none},
		{name: "hedged allergy", user: "I think I'm allergic to kiwi", want: none},
		{name: "hypothetical allergy", user: "If I were allergic to bees I would know", want: none},
		{name: "daughter allergic is the child only", user: "my daughter Mia is allergic to eggs", want: none,
			changes: []FactChange{add("children", "Mia (daughter)")}},
		{name: "vegetarian", user: "I'm vegetarian", want: map[string]string{"diet": "vegetarian"}},
		{name: "a vegan", user: "I am a strict vegan, any recipes?", want: map[string]string{"diet": "vegan"}},
		{name: "went vegan", user: "I went vegan last year", want: map[string]string{"diet": "vegan"}},
		{name: "keto diet", user: "I'm on a keto diet", want: map[string]string{"diet": "keto"}},
		{name: "not vegetarian", user: "I'm not vegetarian", want: none},
		{name: "no longer vegetarian", user: "I'm no longer vegetarian", want: none, changes: []FactChange{del("diet", "vegetarian")}},
		{name: "not vegan anymore", user: "I'm not a vegan anymore", want: none, changes: []FactChange{del("diet", "vegan")}},
		{name: "used to be and now", user: "I used to be vegetarian but now I'm pescetarian", want: map[string]string{"diet": "pescatarian"}},
		{name: "used to be", user: "I used to be vegetarian", want: none, changes: []FactChange{del("diet", "vegetarian")}},
		{name: "stopped being", user: "I stopped being vegan", want: none, changes: []FactChange{del("diet", "vegan")}},
		{name: "if I were vegan", user: "if I were vegan, what would I eat?", want: none},
		{name: "imagine I'm vegan", user: "imagine I'm vegan for a week", want: none},
		{name: "role-play", user: "Let's role-play: I'm a vegan pirate", want: none},
		{name: "vegan-friendly", user: "I'm vegan-friendly", want: none},
		{name: "lactose intolerant", user: "I'm lactose intolerant", want: none, changes: []FactChange{add("dietary_restrictions", "lactose")}},
		{name: "celiac", user: "I'm celiac", want: none, changes: []FactChange{add("dietary_restrictions", "gluten")}},
		{name: "don't eat pork", user: "I don't eat pork", want: none, changes: []FactChange{add("dietary_restrictions", "pork")}},
		{name: "don't eat breakfast", user: "I don't eat breakfast", want: none},

		// Languages.
		{name: "speak list", user: "I speak English, Portuguese and a little French", want: none,
			changes: []FactChange{add("languages", "English"), add("languages", "Portuguese"), add("languages", "French")}},
		{name: "also speak", user: "I also speak German fluently", want: none, changes: []FactChange{add("languages", "German")}},
		{name: "fluent in", user: "I'm fluent in Japanese", want: none, changes: []FactChange{add("languages", "Japanese")}},
		{name: "speak to someone", user: "I speak to my boss every day", want: none},
		{name: "don't speak", user: "I don't speak Spanish", want: none},
		{name: "don't speak anymore", user: "I don't speak Spanish anymore", want: none, changes: []FactChange{rm("languages", "Spanish")}},
		{name: "no longer speak", user: "I no longer speak Russian", want: none, changes: []FactChange{rm("languages", "Russian")}},
		{name: "native language", user: "My native language is Portuguese", want: map[string]string{"native_language": "Portuguese"}},
		{name: "mother tongue", user: "my mother tongue is Polish", want: map[string]string{"native_language": "Polish"}},

		// People and animals.
		{name: "dog named", user: "I have a dog named Rex", want: none, changes: []FactChange{add("pets", "Rex (dog)")}},
		{name: "my cat", user: "my cat Luna loves boxes", want: none, changes: []FactChange{add("pets", "Luna (cat)")}},
		{name: "dog's name", user: "my dog's name is Bolt", want: none, changes: []FactChange{add("pets", "Bolt (dog)")}},
		{name: "adopted kitten", user: "We adopted a kitten called Mochi", want: none, changes: []FactChange{add("pets", "Mochi (cat)")}},
		{name: "dog died", user: "my dog Rex died last week", want: none, changes: []FactChange{rm("pets", "Rex (dog)")}},
		{name: "dog passed away", user: "My dog Rex passed away.", want: none, changes: []FactChange{rm("pets", "Rex (dog)")}},
		{name: "late dog", user: "I miss my late dog Rex", want: none, changes: []FactChange{rm("pets", "Rex (dog)")}},
		{name: "dog without a name", user: "my dog loves walks", want: none},
		{name: "daughter", user: "my daughter Mia starts school today", want: none, changes: []FactChange{add("children", "Mia (daughter)")}},
		{name: "kids are", user: "My kids are Mia, Leo and Ben.", want: none,
			changes: []FactChange{add("children", "Mia"), add("children", "Leo"), add("children", "Ben")}},
		{name: "kids are not names", user: "my kids are awesome and loud", want: none},
		{name: "named after", user: "I have a son named after my father", want: none},
		{name: "called by", user: "my daughter is called by her middle name", want: none},
		{name: "son named", user: "I have a son named Leo", want: none, changes: []FactChange{add("children", "Leo (son)")}},
		{name: "sister lives elsewhere", user: "my sister Ana lives in Paris", want: none, changes: []FactChange{add("siblings", "Ana (sister)")}},
		{name: "wife's name", user: "My wife's name is Maria and she is a nurse", want: map[string]string{"partner": "Maria (wife)"}},
		{name: "husband", user: "my husband Tom cooks on Sundays", want: map[string]string{"partner": "Tom (husband)"}},
		{name: "wife and I", user: "my wife and I live in Lisbon", want: map[string]string{"location": "Lisbon"}},
		{name: "married to", user: "I'm married to Sam", want: map[string]string{"relationship_status": "married", "partner": "Sam (spouse)"}},
		{name: "divorced", user: "I'm divorced", want: map[string]string{"relationship_status": "divorced"}, changes: []FactChange{del("partner", "")}},
		{name: "got divorced", user: "I just got divorced", want: map[string]string{"relationship_status": "divorced"}, changes: []FactChange{del("partner", "")}},
		{name: "broke up", user: "we broke up last month", want: none, changes: []FactChange{del("partner", "")}},

		// Tastes and pursuits.
		{name: "love", user: "I love hiking and climbing", want: none, changes: like("hiking and climbing")},
		{name: "like a list", user: "I like jazz, blues and soul", want: none,
			changes: []FactChange{add("likes", "jazz"), add("likes", "blues"), add("likes", "soul"), rm("dislikes", "jazz"), rm("dislikes", "blues"), rm("dislikes", "soul")}},
		{name: "love you", user: "I love you", want: none},
		{name: "like it when", user: "I like it when it rains", want: none},
		{name: "would like", user: "I'd like a coffee", want: none},
		// Seen in real conversations (LongMemEval): an adverb or a
		// comparative is not a thing liked, "cause" starts a clause, and a
		// lone article is no item.
		{name: "like better", user: "Which one do you think I like better, the options you gave?", want: none},
		{name: "like best", user: "I like best when we talk", want: none},
		{name: "love always", user: "I always love it, I love always being outdoors", want: none},
		{name: "like cause", user: "I love camping trips, cause nature brings such peace", want: none, changes: like("camping trips")},
		{name: "like the", user: "I like the, um, mountains", want: none},
		{name: "like listening to", user: "I really enjoy listening to true crime podcasts", want: none, changes: like("listening to true crime podcasts")},
		{name: "like cooking for", user: "I love cooking for my family", want: none, changes: like("cooking")},
		{name: "like especially", user: "I like especially the gourmet coffee", want: none, changes: like("the gourmet coffee")},
		{name: "like sounds", user: "I like noodles sounds amazing", want: none},
		{name: "like the flavor it adds", user: "I love the flavor it adds to soups", want: none},
		{name: "like the story behind it", user: "I love the story behind it", want: none, changes: like("the story behind it")},
		{name: "like a title", user: "I love Better Call Saul", want: none, changes: like("Better Call Saul")},
		{name: "like a title with a verb", user: "I love Good Will Hunting", want: none, changes: like("Good Will Hunting")},
		{name: "like a year", user: "I love 1984", want: none, changes: like("1984")},
		{name: "like maybe", user: "I like maybe we can do a giant Jenga game", want: none},
		{name: "like a number", user: "I like 3", want: none},
		// A review's sentences: a predicate is no value (cutting it
		// inverted the meaning), an adjective is no adverb, a purpose keeps
		// its cut.
		{name: "dislike that is", user: "I don't like coffee that is cold.", want: none},
		{name: "like list then clause", user: "I like cats, dogs are too loud.", want: none, changes: like("cats")},
		// Seen in real conversations: a kind of place is no place, a
		// gerund of a pronoun and a reply's choices are no thing liked.
		{name: "live in the city", user: "I live in the city", want: none},
		{name: "from the area", user: "I'm from the area", want: none},
		{name: "moved to the countryside", user: "I moved to the countryside last year", want: none},
		{name: "live in the Netherlands", user: "I live in the Netherlands", want: map[string]string{"location": "the Netherlands"}},
		{name: "live in the south of France", user: "I live in the south of France", want: map[string]string{"location": "the south of France"}},
		{name: "from the Middle East", user: "I'm from the Middle East", want: map[string]string{"hometown": "the Middle East"}},
		{name: "live in the same building", user: "I live in the same building", want: none},
		{name: "love the first snow", user: "I love the first snow of winter", want: none, changes: like("the first snow of winter")},
		{name: "like the second one", user: "I like the second one", want: none},
		{name: "love using it", user: "I love using it in smoothies", want: none},
		{name: "enjoy making it", user: "I enjoy making it for friends", want: none},
		{name: "like the third option", user: "I like the third option", want: none},
		{name: "love the suggestions", user: "I love the suggestions", want: none},
		{name: "love The Last of Us", user: "I love The Last of Us", want: none, changes: like("The Last of Us")},
		{name: "like a ticker", user: "I like Farfetch [FTCH] stock", want: none, changes: like("Farfetch")},
		{name: "like then a clause without subject", user: "I like cooking, sounds fun", want: none, changes: like("cooking")},
		{name: "love then is", user: "I love jazz, is that odd?", want: none, changes: like("jazz")},
		{name: "like still water", user: "I like still water", want: none, changes: like("still water")},
		{name: "hate always being", user: "I hate always being late", want: none},
		{name: "like cooking to relax", user: "I like cooking to relax", want: none, changes: like("cooking")},
		{name: "like listening to it", user: "I like listening to it", want: none, changes: like("listening to it")},
		{name: "hate", user: "I hate olives", want: none, changes: []FactChange{add("dislikes", "olives"), rm("likes", "olives")}},
		{name: "don't like", user: "I don't like coriander", want: none, changes: []FactChange{add("dislikes", "coriander"), rm("likes", "coriander")}},
		{name: "don't like anymore", user: "I don't like coriander anymore", want: none, changes: []FactChange{rm("likes", "coriander")}},
		{name: "no longer enjoy", user: "I no longer enjoy running", want: none, changes: []FactChange{rm("likes", "running")}},
		{name: "hobbies are", user: "My hobbies are reading, chess and running.", want: map[string]string{"hobbies": "reading, chess, running"}},
		{name: "hobby is", user: "my hobby is pottery", want: none, changes: []FactChange{add("hobbies", "pottery")}},
		{name: "play", user: "I play tennis on weekends", want: none, changes: []FactChange{add("hobbies", "tennis")}},
		{name: "play with", user: "I play with my kids", want: none},
		{name: "stopped playing", user: "I stopped playing tennis", want: none, changes: []FactChange{rm("hobbies", "tennis")}},
		{name: "don't play anymore", user: "I don't play chess anymore", want: none, changes: []FactChange{rm("hobbies", "chess")}},
		{name: "no longer play", user: "I no longer play golf", want: none, changes: []FactChange{rm("hobbies", "golf")}},
		{name: "goal", user: "My goal is to run a marathon", want: none, changes: []FactChange{add("goals", "run a marathon")}},
		{name: "goal is always", user: "My goal is always to help them find their way", want: none, changes: []FactChange{add("goals", "help them find their way")}},
		{name: "goal keep", user: "My goal is to keep fit", want: none, changes: []FactChange{add("goals", "keep fit")}},
		{name: "goal maybe", user: "My goal is maybe to run a marathon", want: none},
		{name: "hobby listening to", user: "My hobby is listening to music", want: none, changes: []FactChange{add("hobbies", "listening to music")}},
		{name: "hobby a number", user: "My hobby is 3", want: none},
		{name: "like keep", user: "I like keep going", want: none},
		{name: "goal only", user: "My goal is to only eat home cooked food", want: none, changes: []FactChange{add("goals", "eat home cooked food")}},
		{name: "goal better", user: "My goal is better health", want: none, changes: []FactChange{add("goals", "better health")}},
		{name: "goal that can", user: "My goal is to build a company that can last", want: none, changes: []FactChange{add("goals", "build a company that can last")}},
		{name: "favorite", user: "my favorite color is blue", want: map[string]string{"favorite_color": "blue"}},
		{name: "favourite multiword", user: "My favourite TV show is The Wire!", want: map[string]string{"favorite_tv_show": "The Wire"}},
		{name: "favourite colour", user: "My favourite colour is green", want: map[string]string{"favorite_color": "green"}},
		{name: "favourite ice cream flavour", user: "my favourite ice cream flavour is pistachio", want: map[string]string{"favorite_ice_cream_flavor": "pistachio"}},
		{name: "favorite keeps and", user: "My favorite food is fish and chips", want: map[string]string{"favorite_food": "fish and chips"}},
		{name: "prefer", user: "I prefer tea over coffee, but whatever", want: none, changes: []FactChange{add("preferences", "tea over coffee")}},

		// Things.
		{name: "drive", user: "I drive a blue VW Golf", want: map[string]string{"car": "blue VW Golf"}},
		{name: "drive a lot", user: "I drive a lot for work", want: none},
		{name: "my car is", user: "my car is a red Fiat Panda", want: map[string]string{"car": "red Fiat Panda"}},
		{name: "drive a stick", user: "I drive a stick", want: none},
		{name: "like the way you", user: "I like the way you think", want: none},
		{name: "relation name ends at and", user: "I have a cat named Tom and a dog", want: none, changes: []FactChange{add("pets", "Tom (cat)")}},
		{name: "sold my car", user: "I sold my car", want: none, changes: []FactChange{del("car", "")}},
		{name: "don't have a car", user: "I don't have a car", want: none, changes: []FactChange{del("car", "")}},
		{name: "email", user: "My email is ana@example.com.", want: map[string]string{"email": "ana@example.com"}},
		{name: "timezone", user: "my timezone is Europe/Berlin", want: map[string]string{"timezone": "Europe/Berlin"}},
		{name: "pronouns", user: "my pronouns are she/her", want: map[string]string{"pronouns": "she/her"}},

		// Ages and dates (the turn is 2024-03-15).
		{name: "age", user: "I am 34 years old.", want: map[string]string{"birth_year": "1989"}},
		{name: "age hyphenated", user: "im 7-years-old", want: map[string]string{"birth_year": "2016"}},
		{name: "age bare", user: "I'm 34 and I live in Lisbon", want: map[string]string{"birth_year": "1989", "location": "Lisbon"}},
		{name: "age in the second half of the year", user: "I'm 34", ts: july, want: map[string]string{"birth_year": "1990"}},
		{name: "age with a birthday passed", user: "I'm 34, my birthday is March 3rd", want: map[string]string{"birth_year": "1990", "birthday": "03-03"}},
		{name: "age with a birthday to come", user: "My birthday is December 1st and I'm 34", want: map[string]string{"birth_year": "1989", "birthday": "12-01"}},
		{name: "just turned", user: "I just turned 40 today", want: map[string]string{"birth_year": "1984"}},
		{name: "turned in a later month is last year", user: "I turned 30 last December", want: map[string]string{"birth_year": "1993"}},
		{name: "turned in an earlier month is this year", user: "I turned 30 in February", want: map[string]string{"birth_year": "1994"}},
		{name: "turned last week", user: "I turned 34 last week, feeling old already.", want: map[string]string{"birth_year": "1990"}},
		{name: "turned without a time is an age", user: "I turned 34 and I live in Porto", want: map[string]string{"birth_year": "1989", "location": "Porto"}},
		{name: "age without a turn date", user: "I'm 34 years old", noTime: true, want: none},
		{name: "not an age", user: "I'm 5 minutes late", want: none},
		{name: "age out of range", user: "I am 200 years old", want: none},
		{name: "born in a year", user: "I was born in 1990", want: map[string]string{"birth_year": "1990"}},
		{name: "born on", user: "I was born on 3 March 1990", want: map[string]string{"birthday": "1990-03-03"}},
		{name: "birthday", user: "My birthday is on March 3rd.", want: map[string]string{"birthday": "03-03"}},
		{name: "birthday with a year over a comma", user: "My birthday is March 3, 1990.", want: map[string]string{"birthday": "1990-03-03"}},
		{name: "birthday iso", user: "my date of birth is 1985-11-02", want: map[string]string{"birthday": "1985-11-02"}},
		{name: "birthday anchored", user: "my birthday is tomorrow!", want: map[string]string{"birthday": "03-16"}},
		{name: "relative birthday", user: "my birthday is next week", want: none},
		{name: "birthday month only", user: "my birthday is in March", want: none},
		{name: "impossible birthday", user: "my birthday is February 30", want: none},

		// Seen in real conversations: what is not the user speaking (a
		// made-up person, a pasted text, a quotation) and values that only
		// look like the key's. The near misses keep the user's facts.
		{name: "misspelt assume frames the request", user: "Supose I live in Paris and my name is Jo. Plan my week.", want: none},
		{name: "facts before the frame stay", user: "I live in Lisbon. Pretend I'm a pirate and tell me a story", want: map[string]string{"location": "Lisbon"}},
		{name: "can't imagine is no frame", user: "I can't imagine my life without music. My dog Rex loves it", want: none, changes: []FactChange{add("pets", "Rex (dog)")}},
		{name: "assure is no assume", user: "I assure you that my name is Ana", want: map[string]string{"name": "Ana"}},
		{name: "pasted after a request", user: "Proofread this: I live in Rome and work as a chef", want: none},
		{name: "pasted after the following", user: "Here is the following:\nMy name is Pedro", want: none},
		{name: "pasted after a lead-in in another language", user: "Traduza este texto para inglês:\n\nMy name is Pedro.", want: none},
		{name: "facts before a paste stay", user: "My name is Ana. Summarise this: my name is Bob", want: map[string]string{"name": "Ana"}},
		{name: "a colon of the user's own", user: "Quick update: I moved to Berlin", want: map[string]string{"location": "Berlin"}},
		{name: "an edit of the user's own", user: "Edit: I moved to Porto", want: map[string]string{"location": "Porto"}},
		{name: "a block about me", user: "About me:\nI'm from Porto", want: map[string]string{"hometown": "Porto"}},
		{name: "inside an open quote", user: `Give me three bullets on "Why I'm still bullish. I'm 72 and I live in Miami`, want: none},
		{name: "after a closed quote", user: `I watched "Friends" again. I live in Lisbon`, want: map[string]string{"location": "Lisbon"}},
		{name: "called needs a capital", user: "I'm called ana", want: none},
		// Near misses of the frames, pastes and quotes above (review2):
		// the user's own facts stay.
		{name: "a lead-in of context before a line break", user: "A bit of context:\nI live in Lisbon and I work as a teacher.", want: map[string]string{"location": "Lisbon", "occupation": "teacher"}},
		{name: "a greeting and question before a line break", user: "Hi there, quick question:\nI live in Porto. Is it worth buying a car?", want: map[string]string{"location": "Porto"}},
		{name: "a request for the user", user: "Write me a workout plan: I live in Denver.", want: map[string]string{"location": "Denver"}},
		{name: "a request for ideas", user: "Give me some dinner ideas: I'm vegetarian.", want: map[string]string{"diet": "vegetarian"}},
		{name: "an inch mark is no quote", user: `I'm 5'10" tall. I live in Lisbon.`, want: map[string]string{"location": "Lisbon"}},
		{name: "mixed quote marks close", user: "I loved “Dune\". I live in Lisbon.", want: map[string]string{"location": "Lisbon"}},
		{name: "German quote marks close", user: "I just finished „Der Vorleser“. I live in Berlin.", want: map[string]string{"location": "Berlin"}},
		{name: "imagine after a subject narrates", user: "I imagine my cat misses me. Anyway, I live in Lisbon.", want: map[string]string{"location": "Lisbon"}},
		{name: "others assume", user: "People always assume I'm Spanish, but I'm from Lisbon.", want: map[string]string{"hometown": "Lisbon"}},
		{name: "assumes narrates", user: "Everyone assumes I'm older. I live in Leeds.", want: map[string]string{"location": "Leeds"}},
		{name: "imagine my surprise", user: "Imagine my surprise when it arrived! Anyway, I live in Lisbon.", want: map[string]string{"location": "Lisbon"}},
		{name: "imaging is no misspelling", user: "I'm imaging my hard drive tonight. I live in Lisbon.", want: map[string]string{"location": "Lisbon"}},
		{name: "let's say as a filler", user: "I'd like to visit, let's say, in June. I live in Lisbon.", want: map[string]string{"location": "Lisbon"}},
		{name: "roleplaying games", user: "I love roleplaying games and I live in Lisbon.", want: map[string]string{"location": "Lisbon"}, changes: like("roleplaying games")},
		{name: "a place in a script without case", user: "I live in 東京", want: map[string]string{"location": "東京"}},
		{name: "called in a script without case", user: "I'm called 李伟", want: map[string]string{"name": "李伟"}},
		{name: "married to a person by job", user: "I'm married to a doctor", want: map[string]string{"relationship_status": "married"}},
		{name: "engaged to be married", user: "I'm engaged to be married next spring", want: map[string]string{"relationship_status": "engaged"}},
		{name: "my email is no pasted text", user: "My email: ana@example.com. I live in Lisbon", want: map[string]string{"location": "Lisbon"}},
		// ... and the frames and pastes still hold.
		{name: "a softened frame", user: "Let's imagine I live in Paris. My name is Jo.", want: none},
		{name: "just assume", user: "Just assume I'm 40. I live in Tokyo.", want: none},
		{name: "help me answer a pasted text", user: "Can you help me answer this guy: I'm 51 and I live in Leeds.", want: none},
		{name: "a possessive's email", user: "Help me reply to my landlord's email:\nHi, my name is Mark.", want: none},
		{name: "a text from someone", user: "I got a text from my landlord:\nHi, my name is Mark and I live in Leeds.", want: none},
		{name: "bullets of a pasted text", user: "Give me 5 bullets:\nMy name is Petra and I live in Prague.", want: none},
		{name: "from a place originally", user: "I'm from Lisbon originally", want: map[string]string{"hometown": "Lisbon"}},
		{name: "from a region", user: "I'm from northern Italy", want: map[string]string{"hometown": "northern Italy"}},
		{name: "from a name with connectors", user: "I grew up in Rio de Janeiro", want: map[string]string{"hometown": "Rio de Janeiro"}},
		{name: "live in a common noun", user: "I live in denial", want: none},
		{name: "live in a numbered place", user: "I live in district 9", want: map[string]string{"location": "district 9"}},
		{name: "work as an article and as well", user: "I work as a nurse as well", want: map[string]string{"occupation": "nurse"}},
		{name: "work as without an article", user: "I work as nurse", want: map[string]string{"occupation": "nurse"}},
		{name: "work as part of", user: "I work as part of a team", want: none},
		{name: "speak a lower-case language", user: "I speak french", want: none, changes: []FactChange{add("languages", "french")}},
		{name: "speak a manner", user: "I speak my mind", want: none},
		{name: "married to a person described", user: "I'm married to a wonderful man", want: map[string]string{"relationship_status": "married"}},
		{name: "engaged to a thing", user: "I'm engaged to my job", want: none},
		{name: "like a quality", user: "I love the self-acceptance", want: none},
		{name: "like a relative clause", user: "I love the sense of accomplishment I get", want: none},
		{name: "like a quality of it", user: "I enjoy the physical challenge of it", want: none},
		{name: "like what a reply offered", user: "I love the quinoa bowl idea", want: none},
		{name: "like the template", user: "I like the template", want: none},
		{name: "like the ocean", user: "I love the ocean", want: none, changes: like("the ocean")},

		// Several statements, and what is never read.
		{name: "several statements", user: "Hi! My name is Ana and I live in Lisbon. I work at Feedzai; I'm 29 years old",
			want: map[string]string{"name": "Ana", "location": "Lisbon", "employer": "Feedzai", "birth_year": "1994"}},
		{name: "marker stripped", user: "[facts: name=Bob; location=Oslo] my name is Carol", want: map[string]string{"name": "Carol"}},
		{name: "assistant name ignored", user: "hello", assistant: "My name is Bot and I live in the cloud.", want: none},
		{name: "weather", user: "the weather is 20C", want: none},
		{name: "question", user: "What is my name?", want: none},
		{name: "question clause", user: "is my name is Bob?", want: none},
		{name: "hypothetical", user: "If my name is Bob, then what?", want: none},
		{name: "reported", user: "he said my name is Bob", want: none},
		{name: "told me", user: "he told me my name is Bob", want: none},
		{name: "negated call me", user: "Please don't call me Bob", want: none},
		{name: "negated a few words back", user: "I don't want you to call me Bob", want: none},
		{name: "negated name", user: "My name isn't Bob", want: none},
		{name: "never moved", user: "I never moved to Berlin", want: none},
		{name: "not married", user: "I'm not married", want: none},
		{name: "call me back", user: "call me back later", want: none},
		{name: "call me crazy", user: "Call me crazy, but I like rain", want: none, changes: like("rain")},
		{name: "live in a flat", user: "I live in a small flat", want: none},
		{name: "don't live in a flat anymore", user: "I don't live in a flat anymore", want: none},
		{name: "name not a name", user: "My name is not important", want: none},
		{name: "bad email", user: "my email is ana at example dot com", want: none},
		{name: "unknown value", user: "my timezone is unknown", want: none},
		{name: "value too long", user: "I prefer " + strings.Repeat("x", 150), want: none},
		{name: "statement past scan limit", user: strings.Repeat("blah ", 2000) + "my name is Ana", want: none},
		{name: "empty", user: "", want: none},
	}
}

func TestRulesFacts(t *testing.T) {
	t.Parallel()

	r := NewRules()
	for _, tt := range rulesCases() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := tt.extract(r)
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if !maps.Equal(res.Facts, tt.want) || !slices.Equal(res.Changes, tt.changes) {
				t.Errorf("%q:\nfacts   %v\nchanges %v\nwant    %v\n        %v", tt.user, res.Facts, res.Changes, tt.want, tt.changes)
			}
		})
	}
}

// TestRulesEveryRuleTested: without any one of the rules, some row of
// TestRulesFacts gets another result, so no statement is untested.
func TestRulesEveryRuleTested(t *testing.T) {
	t.Parallel()

	cases := rulesCases()
	table := newRuleTable()
	for i := range table {
		without := &Rules{rules: append(append([]rule(nil), table[:i]...), table[i+1:]...)}
		covered := false
		// The rows whose text the rule's expression matches first: one of
		// them usually notices, where the table's order ran half the rows
		// under every rule (18 s of the race detector's CPU). Every row is
		// still tried before a rule is found removable.
		byMatch := slices.Clone(cases)
		slices.SortStableFunc(byMatch, func(a, b rulesCase) int {
			return cmp.Compare(b2i(!table[i].re.MatchString(a.user+"\n"+a.assistant)), b2i(!table[i].re.MatchString(b.user+"\n"+b.assistant)))
		})
		for _, c := range byMatch {
			res, err := c.extract(without)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(res.Facts, c.want) || !slices.Equal(res.Changes, c.changes) {
				covered = true
				break
			}
		}
		if !covered {
			t.Errorf("rule %d (%s) can be removed without any row of TestRulesFacts noticing", i, table[i].re)
		}
	}
	if n := len(cases); n < 60 {
		t.Errorf("%d rows, want at least 60", n)
	}
}

func TestRulesContext(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		user      string
		assistant string
		want      []QA
	}{
		{name: "verbatim pair", user: "  How do I boil an egg?\n", assistant: "Boil it for 8 minutes. ",
			want: []QA{{Q: "How do I boil an egg?", A: "Boil it for 8 minutes."}}},
		{name: "markers stripped", user: "[facts: name=Ana]\nWhat's 2+2?", assistant: "[context: q=x a=y] 4",
			want: []QA{{Q: "What's 2+2?", A: "4"}}},
		{name: "empty answer", user: "thanks", assistant: "", want: []QA{{Q: "thanks", A: ""}}},
		{name: "no pair for empty user message", user: "  ", assistant: "Anything else?", want: nil},
		{name: "no pair for markers only", user: "[facts: a=b]", assistant: "ok", want: nil},
		{name: "invalid utf-8 and NUL sanitised", user: "caf\xe9\x00?", assistant: "a\x00b",
			want: []QA{{Q: "caf\uFFFD?", A: "ab"}}},
	}
	r := NewRules()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := r.Extract(context.Background(), Input{
				Turn: Turn{UserMessage: tt.user, AssistantResponse: tt.assistant, Timestamp: testTurnTime},
			})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if len(res.Context) != len(tt.want) {
				t.Fatalf("context = %q, want %q", res.Context, tt.want)
			}
			for i := range tt.want {
				if res.Context[i] != tt.want[i] {
					t.Errorf("context[%d] = %q, want %q", i, res.Context[i], tt.want[i])
				}
			}
			if res.Usage != (Usage{}) {
				t.Errorf("usage = %+v, want zero", res.Usage)
			}
		})
	}
}

func TestRulesInfoAndContext(t *testing.T) {
	t.Parallel()

	r := NewRules()
	if got, want := r.Info(), (Info{Name: "rules", PromptVersion: "rules-v2"}); got != want {
		t.Errorf("Info() = %+v, want %+v", got, want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Extract(ctx, Input{Turn: Turn{UserMessage: "my name is Ana"}})
	if !errors.Is(err, ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Errorf("Extract(cancelled ctx) error = %v, want ErrTransient and context.Canceled", err)
	}

	// The zero value works too.
	res, err := (&Rules{}).Extract(context.Background(), Input{Turn: Turn{UserMessage: "my name is Ana"}})
	if err != nil || res.Facts["name"] != "Ana" {
		t.Errorf("zero Rules: facts = %v, err = %v; want name Ana", res.Facts, err)
	}
}

func TestRulesLargeInput(t *testing.T) {
	t.Parallel()

	user := "my name is Ana. " + strings.Repeat("I live in Lisbon. ", 60_000) // ~1 MiB
	res, err := NewRules().Extract(context.Background(), Input{Turn: Turn{UserMessage: user}})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if res.Facts["name"] != "Ana" || res.Facts["location"] != "Lisbon" {
		t.Errorf("facts = %v, want name Ana and location Lisbon", res.Facts)
	}
	if len(res.Context) != 1 || res.Context[0].Q != strings.TrimSpace(user) {
		t.Errorf("context pair is not the verbatim message")
	}

	// Hundreds of statements in one clause: every one but the last has a
	// value far too long to keep.
	user = strings.Repeat("my name is Ana ", 100_000)
	res, err = NewRules().Extract(context.Background(), Input{Turn: Turn{UserMessage: user}})
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	if name, ok := res.Facts["name"]; ok && len(strings.Fields(name)) > rulesMaxNameWords {
		t.Errorf("name = %q, longer than a name", name)
	}
}

func FuzzRules(f *testing.F) {
	for _, s := range []string{
		"",
		"my name is Ana and I live in Lisbon",
		"I'm 30 years old, I'm allergic to cats; call me Al",
		"my favorite big red thing is a bus",
		"[facts: name=Bob] I work at Acme",
		"I work as \xff\xfe",
		"my name is \x00 Ana",
		"I'm allergic to peanuts, shellfish and eggs; my dog Rex died",
		"I'm 34, my birthday is March 3rd, I live in Lisbon, sorry, I meant Porto",
		"I don't live in Berlin anymore, I moved to Porto and I quit my job at Acme",
	} {
		f.Add(s, "My name is Bot")
	}
	r := NewRules()
	f.Fuzz(func(t *testing.T, user, assistant string) {
		res, err := r.Extract(context.Background(), Input{
			Turn: Turn{UserMessage: user, AssistantResponse: assistant, Timestamp: testTurnTime},
		})
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		if res.Facts == nil {
			t.Fatal("Facts is nil")
		}
		for k, v := range res.Facts {
			if !snakeKeyRE.MatchString(k) {
				t.Errorf("key %q is not snake_case ASCII", k)
			}
			if v == "" || v != strings.TrimSpace(v) || utf8.RuneCountInString(v) > rulesMaxValueRunes {
				t.Errorf("value %q of %q is empty, untrimmed or too long", v, k)
			}
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
				t.Errorf("value %q of %q is not storable text", v, k)
			}
		}
		for _, c := range res.Changes {
			if !snakeKeyRE.MatchString(c.Key) {
				t.Errorf("change key %q is not snake_case ASCII", c.Key)
			}
			if _, list := events.CanonicalFactKey(c.Key); c.Op != OpDelete && !list || c.Op != OpAdd && c.Op != OpRemove && c.Op != OpDelete {
				t.Errorf("change %+v: not an add or remove of a list key, nor a delete", c)
			}
			if c.Op != OpDelete && (c.Value == "" || c.Value != strings.TrimSpace(c.Value)) || utf8.RuneCountInString(c.Value) > rulesMaxValueRunes+20 {
				t.Errorf("change %+v: value empty, untrimmed or too long", c)
			}
			if _, set := res.Facts[c.Key]; set && c.Op == OpDelete {
				t.Errorf("change %+v deletes a key the turn sets", c)
			}
		}
		for _, qa := range res.Context {
			if qa.Q == "" {
				t.Error("context pair with empty question")
			}
			if !utf8.ValidString(qa.Q) || !utf8.ValidString(qa.A) {
				t.Errorf("context pair %q is not valid UTF-8", qa)
			}
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
