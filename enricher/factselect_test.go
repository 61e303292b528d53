package enricher

import (
	"slices"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

func TestSelectFacts(t *testing.T) {
	// Most recently set first, as Recall returns them.
	facts := func(kv ...string) []store.Fact {
		var out []store.Fact
		for i := 0; i < len(kv); i += 2 {
			out = append(out, store.Fact{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	user := facts(
		"dog_name", "Rex",
		"occupation", "nurse",
		"favorite_food", "pad thai",
		"allergy", "peanuts",
		"location", "Lisbon",
		"car", "blue Tesla",
		"hobby", "the guitar",
		"name", "Ana",
		"goal:marathon", "run in April",
		"native_language", "Portuguese",
	)
	tests := []struct {
		name     string
		mode     string
		keywords []string
		want     []string // keys, in order
	}{
		// Core first, as with relevant: a tight budget drops the others
		// first (a client written from protocol.md found the core facts,
		// set first and so last in recall order, dropped first).
		{"all is every fact, core first", events.FactsAll, []string{"dog"},
			[]string{"occupation", "location", "name", "native_language", "dog_name", "favorite_food", "allergy", "car", "hobby", "goal:marathon"}},
		{"no keywords: core only, in given order", events.FactsRelevant, nil,
			[]string{"occupation", "location", "name", "native_language"}},
		{"key word after underscore", events.FactsRelevant, []string{"dog", "walk"},
			[]string{"occupation", "location", "name", "native_language", "dog_name"}},
		{"key word after colon", events.FactsRelevant, []string{"marathon", "training"},
			[]string{"occupation", "location", "name", "native_language", "goal:marathon"}},
		{"value word", events.FactsRelevant, []string{"tesla", "charging"},
			[]string{"occupation", "location", "name", "native_language", "car"}},
		{"plural matches singular", events.FactsRelevant, []string{"dogs", "allergies"},
			[]string{"occupation", "location", "name", "native_language", "dog_name", "allergy"}},
		{"singular matches plural value", events.FactsRelevant, []string{"peanut"},
			[]string{"occupation", "location", "name", "native_language", "allergy"}},
		{"relevant keep recall order", events.FactsRelevant, []string{"food", "guitar", "dog"},
			[]string{"occupation", "location", "name", "native_language", "dog_name", "favorite_food", "allergy", "hobby"}},
		// A message about food bears on allergies, though it names
		// neither them nor peanuts (keyTopics).
		{"a topic of the key", events.FactsRelevant, []string{"cake", "recipes"},
			[]string{"occupation", "location", "name", "native_language", "allergy"}},
		// Asked about by another name of the vocabulary key: allergic_to
		// (allergies, stored as its alias allergy here), kids (children),
		// wife (partner), college (education), interests (hobbies).
		{"alias word of the key", events.FactsRelevant, []string{"allergic"},
			[]string{"occupation", "location", "name", "native_language", "allergy"}},
		{"alias of a pet key", events.FactsRelevant, []string{"pets"},
			[]string{"occupation", "location", "name", "native_language", "dog_name"}},
		{"stop word in a value never matches", events.FactsRelevant, []string{"the"},
			[]string{"occupation", "location", "name", "native_language"}},
		{"no prefix matching", events.FactsRelevant, []string{"do", "car"},
			[]string{"occupation", "location", "name", "native_language", "car"}},
		{"core not repeated as relevant", events.FactsRelevant, []string{"lisbon", "name"},
			[]string{"occupation", "location", "name", "native_language", "dog_name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range selectFacts(tt.mode, tt.keywords, user) {
				got = append(got, f.Key)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("selectFacts(%q, %q) = %q, want %q", tt.mode, tt.keywords, got, tt.want)
			}
		})
	}
	// Every core key is core, whatever the message.
	var core []store.Fact
	for _, k := range CoreFactKeys {
		core = append(core, store.Fact{Key: k, Value: "v"})
	}
	if got := selectFacts(events.FactsRelevant, []string{"unrelated"}, append(core, store.Fact{Key: "pet", Value: "cat"})); len(got) != len(CoreFactKeys) {
		t.Errorf("core keys: got %d facts, want the %d core ones", len(got), len(CoreFactKeys))
	}
	vocab := []store.Fact{{Key: "children", Value: "Mia (daughter)"}, {Key: "partner", Value: "Maria"},
		{Key: "education", Value: "MIT"}, {Key: "hobbies", Value: "climbing"}, {Key: "allergies", Value: "peanuts"}}
	for _, tt := range []struct {
		keywords []string
		want     string
	}{{[]string{"old", "kids"}, "children"}, {[]string{"wife", "called"}, "partner"},
		{[]string{"college"}, "education"}, {[]string{"interests"}, "hobbies"}, {[]string{"allergic"}, "allergies"},
		{[]string{"food", "allergies"}, "allergies"}} {
		var got []string
		for _, f := range selectFacts(events.FactsRelevant, tt.keywords, vocab) {
			got = append(got, f.Key)
		}
		if !slices.Equal(got, []string{tt.want}) {
			t.Errorf("selectFacts(%q) = %q, want %q", tt.keywords, got, tt.want)
		}
	}
	// An alias of several words needs them all: a common one alone ("first"
	// of first_language, "time" of time_zone) selects nothing, nor does a
	// topic of another key (a recipe is no question of a time zone).
	more := []store.Fact{{Key: "native_language", Value: "Portuguese"},
		{Key: "timezone", Value: "Europe/Lisbon"}, {Key: "allergies", Value: "peanuts"}}
	for _, kw := range [][]string{{"first"}, {"time"}, {"zone"}} {
		var got []string
		for _, f := range selectFacts(events.FactsRelevant, kw, more) {
			if !slices.Contains(CoreFactKeys, f.Key) {
				got = append(got, f.Key)
			}
		}
		if len(got) != 0 {
			t.Errorf("selectFacts(%q) = %q, want no fact beyond the core ones", kw, got)
		}
	}
	if got := selectFacts(events.FactsRelevant, []string{"x"}, nil); len(got) != 0 {
		t.Errorf("no facts: got %v", got)
	}
}

func TestStem(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"dogs", "dog"}, {"dog", "dog"}, {"allergies", "allergy"}, {"allergy", "allergy"},
		{"glasses", "glass"}, {"glass", "glass"}, {"boxes", "box"}, {"dishes", "dish"},
		{"bus", "bus"}, {"cars", "car"}, {"pies", "pie"}, {"notes", "note"},
	} {
		if got := stem(tt.in); got != tt.want {
			t.Errorf("stem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestCoreFactKeys: the core set is the vocabulary's core keys with their
// aliases, so that the pre-vocabulary core keys (facts stored before it under
// "city" or "language") stay core, and a key that is not core never is.
func TestCoreFactKeys(t *testing.T) {
	for _, k := range []string{
		"name", "preferred_name", "pronouns", "location", "city", "timezone", "native_language", "language", "occupation", // before the vocabulary
		"languages", "job", "nickname", "time_zone", "mother_tongue", // the vocabulary's
	} {
		if !coreKeys[k] || !slices.Contains(CoreFactKeys, k) {
			t.Errorf("%q is not core", k)
		}
	}
	for _, k := range []string{"allergies", "allergy", "employer", "pets", "birth_year", "favorite_color", "hometown", ""} {
		if coreKeys[k] {
			t.Errorf("%q is core", k)
		}
	}
	for _, k := range events.FactKeys() {
		if coreKeys[k.Key] != k.Core {
			t.Errorf("%q: core = %v, the vocabulary says %v", k.Key, coreKeys[k.Key], k.Core)
		}
		for _, a := range k.Aliases {
			if coreKeys[a] != k.Core {
				t.Errorf("alias %q of %q: core = %v, the vocabulary says %v", a, k.Key, coreKeys[a], k.Core)
			}
		}
	}
}

// TestSelectFactsByTopic: a question about what a vocabulary key bears on
// selects it though it shares no word with the key, its aliases or its
// value (keyTopics), the message read as enrich reads it (Keywords); and a
// message on something else leaves those facts out.
func TestSelectFactsByTopic(t *testing.T) {
	user := []store.Fact{
		{Key: "birth_year", Value: "1990"}, {Key: "hometown", Value: "Braga"}, {Key: "partner", Value: "Sam"},
		{Key: "relationship_status", Value: "engaged"}, {Key: "children", Value: "Mia"}, {Key: "employer", Value: "Atelier Norte"},
		{Key: "education", Value: "architecture at FAUP"}, {Key: "car", Value: "a red Fiat Panda"},
		{Key: "plans", Value: "Azores in August"}, {Key: "likes", Value: "jazz"}, {Key: "hobbies", Value: "bouldering"},
		{Key: "allergies", Value: "peanuts"},
	}
	tests := []struct {
		message string
		want    []string
	}{
		{"How old am I?", []string{"birth_year"}},
		{"When was I born?", []string{"birth_year", "hometown"}},
		{"Where am I from?", []string{"hometown"}},
		{"Where did I grow up?", []string{"hometown"}},
		{"Am I married?", []string{"partner", "relationship_status"}},
		{"Gift ideas for our wedding anniversary?", []string{"partner", "relationship_status", "likes", "hobbies"}},
		{"How do I balance family time?", []string{"partner", "children"}},
		{"How do I tell my boss I need a day off?", []string{"employer"}},
		{"Should I study for the exam tonight?", []string{"education", "plans"}}, // tonight: what is coming
		{"Is driving in snow safe?", []string{"car"}},
		{"What should I pack for my trip?", []string{"plans"}},
		{"Can you recommend a film?", []string{"likes", "hobbies"}},
		// A time walk: the weekend's plans, and fun.
		{"What am I doing this weekend?", []string{"plans", "likes", "hobbies"}},
		{"What do I usually do for fun?", []string{"likes", "hobbies"}},
		{"Anything on for tomorrow?", []string{"plans"}},
		// Other subjects select none of them.
		{"Where is the nearest station?", nil},
		{"Explain TCP from the ground up", nil},
		{"What is the capital of Peru?", nil},
		// Words of code and tools (a review).
		{"How do I set up React Native?", nil},
		{"What is a class in Python?", nil},
		{"How do I mount Google Drive?", nil},
		{"my cron job fails", nil},
		{"bump the major version", nil},
		{"parent element css", nil},
		{"schedule a meeting", nil},
		{"Any ideas for a name for my variable?", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, f := range selectFacts(events.FactsRelevant, Keywords(tt.message), user) {
			got = append(got, f.Key)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q (keywords %q): selected %q, want %q", tt.message, Keywords(tt.message), got, tt.want)
		}
	}
}
