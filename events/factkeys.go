package events

import (
	"encoding/json"
	"strings"
)

// FactKeyInfo describes one key of the canonical fact vocabulary, which the
// rules extractor and the model prompt share (docs/protocol.md, "Fact
// keys"). Keys outside it are allowed and single-valued.
type FactKeyInfo struct {
	// Key is the canonical snake_case key.
	Key string
	// List says the key holds a set of items (allergies, languages, pets),
	// each added and removed on its own, rather than one value.
	List bool
	// Core says enrich injects the fact whatever the message is about.
	Core bool
	// Aliases are other keys that mean the same; they are stored as Key.
	Aliases []string
	// Doc says what the value is, for the docs and the model prompt.
	Doc string
}

// factKeys is the vocabulary, in documentation order. docs/protocol.md
// ("Fact keys") holds the same table; TestFactKeysDocumented keeps the two
// in sync.
//
// Every alias is a spelling a model or an older extractor is expected to
// use for the key. A key whose values have another meaning (an age is not a
// birth year) is never an alias.
var factKeys = []FactKeyInfo{
	// Who the user is.
	{Key: "name", Core: true, Aliases: []string{"full_name", "user_name", "real_name"},
		Doc: "the user's name as they gave it"},
	{Key: "preferred_name", Core: true, Aliases: []string{"nickname", "call_me", "goes_by"},
		Doc: "what the user wants to be called"},
	{Key: "pronouns", Core: true, Aliases: []string{"pronoun", "preferred_pronouns"},
		Doc: `the user's pronouns, e.g. "she/her"`},
	{Key: "gender", Aliases: []string{"gender_identity"},
		Doc: "the user's gender, as they stated it"},
	{Key: "birthday", Aliases: []string{"birth_date", "date_of_birth", "dob", "bday"},
		Doc: "YYYY-MM-DD, or MM-DD when the year is not known"},
	{Key: "birth_year", Aliases: []string{"year_of_birth", "birthyear"},
		Doc: "a year, YYYY; an age is stored as the birth year it implies on the turn's date"},
	// Where and in what language.
	{Key: "location", Core: true, Aliases: []string{"city", "home", "lives_in", "residence", "current_city", "current_location", "home_city", "place_of_residence"},
		Doc: "where the user lives now: a city or region"},
	{Key: "hometown", Aliases: []string{"home_town", "origin", "place_of_origin", "grew_up_in", "from"},
		Doc: "where the user is from or grew up"},
	{Key: "timezone", Core: true, Aliases: []string{"time_zone", "tz"},
		Doc: `an IANA zone or offset, e.g. "Europe/Lisbon"`},
	{Key: "native_language", Core: true, Aliases: []string{"mother_tongue", "first_language"},
		Doc: "the user's first language"},
	{Key: "languages", List: true, Core: true, Aliases: []string{"language", "spoken_languages", "languages_spoken", "other_languages", "foreign_languages", "second_language"},
		Doc: "languages the user speaks, one item each"},
	// Work and education.
	{Key: "occupation", Core: true, Aliases: []string{"job", "job_title", "profession", "role", "position", "career"},
		Doc: `what the user does for a living, e.g. "nurse", "retired"`},
	{Key: "employer", Aliases: []string{"company", "workplace", "works_at", "work_place", "company_name", "employer_name", "organization", "organisation"},
		Doc: "the organisation the user works for"},
	{Key: "education", Aliases: []string{"school", "university", "college", "alma_mater", "degree", "studies"},
		Doc: "where (and what) the user studies or studied"},
	// People and animals.
	{Key: "relationship_status", Aliases: []string{"marital_status", "relationship"},
		Doc: `e.g. "married", "single", "divorced", "engaged"`},
	{Key: "partner", Aliases: []string{"spouse", "wife", "husband", "girlfriend", "boyfriend", "fiance", "fiancee", "significant_other", "partner_name", "spouse_name", "wife_name", "husband_name", "girlfriend_name", "boyfriend_name"},
		Doc: `the partner's name, with the relation when it is not "partner": "Maria (wife)"`},
	{Key: "children", List: true, Aliases: []string{"child", "kids", "kid", "daughter", "son", "daughters", "sons", "child_name", "children_names", "daughter_name", "son_name"},
		Doc: `one item per child: the name, with "(daughter)" or "(son)" when known: "Mia (daughter)"`},
	{Key: "siblings", List: true, Aliases: []string{"sibling", "brother", "sister", "brothers", "sisters", "brother_name", "sister_name"},
		Doc: `one item per sibling: "Ana (sister)"`},
	{Key: "pets", List: true, Aliases: []string{"pet", "pet_name", "pet_names", "animals", "dog", "cat", "dog_name", "cat_name"},
		Doc: `one item per pet: the name and the animal, "Rex (dog)"`},
	// Food and health.
	{Key: "diet", Aliases: []string{"diet_type", "dietary_preference", "diet_preference", "eating_style"},
		Doc: `the user's diet: "vegetarian", "vegan", "pescatarian", "keto", ...`},
	{Key: "allergies", List: true, Aliases: []string{"allergy", "food_allergy", "food_allergies", "allergic_to", "allergens", "drug_allergies"},
		Doc: "what the user is allergic to, one item each"},
	{Key: "dietary_restrictions", List: true, Aliases: []string{"dietary_restriction", "food_restrictions", "intolerances", "food_intolerances", "does_not_eat"},
		Doc: `what the user does not eat or drink, other than allergies: "gluten", "pork", "alcohol"`},
	{Key: "health_conditions", List: true, Aliases: []string{"health_condition", "medical_conditions", "medical_condition"},
		Doc: "lasting health conditions the user mentioned, one item each"},
	// Tastes and pursuits.
	{Key: "likes", List: true, Aliases: []string{"like", "loves", "enjoys"},
		Doc: "things the user likes, one item each"},
	{Key: "dislikes", List: true, Aliases: []string{"dislike", "hates", "does_not_like"},
		Doc: "things the user dislikes, one item each"},
	{Key: "hobbies", List: true, Aliases: []string{"hobby", "interests", "interest", "pastimes", "pastime"},
		Doc: "what the user does for fun, one item each"},
	{Key: "preferences", List: true, Aliases: []string{"preference", "prefers"},
		Doc: `what the user prefers, one item each: "tea over coffee", "aisle seats", "short answers"`},
	{Key: "goals", List: true, Aliases: []string{"goal", "objectives", "aspirations"},
		Doc: "what the user is working towards, one item each"},
	{Key: "plans", List: true, Aliases: []string{"plan", "upcoming_plans", "upcoming_events"},
		Doc: `dated plans worth keeping, with their absolute date: "trip to Japan (2027-04)"`},
	// Things and contact.
	{Key: "car", Aliases: []string{"vehicle", "car_model", "automobile"},
		Doc: `the car the user has, e.g. "blue VW Golf"`},
	{Key: "email", Aliases: []string{"email_address", "e_mail"},
		Doc: "the user's email address"},
}

var factKeyIndex = func() map[string]int {
	m := make(map[string]int)
	for i, k := range factKeys {
		m[k.Key] = i
		for _, a := range k.Aliases {
			m[a] = i
		}
	}
	return m
}()

// FactKeys returns the canonical vocabulary, in documentation order. The
// entries' Aliases are copies: changing them changes nothing.
func FactKeys() []FactKeyInfo {
	out := make([]FactKeyInfo, len(factKeys))
	for i, k := range factKeys {
		k.Aliases = append([]string(nil), k.Aliases...)
		out[i] = k
	}
	return out
}

// CanonicalFactKey returns the canonical form of a snake_case key (itself
// when the vocabulary has no entry for it) and whether it is list-valued.
func CanonicalFactKey(key string) (canonical string, list bool) {
	if i, ok := factKeyIndex[key]; ok {
		return factKeys[i].Key, factKeys[i].List
	}
	return key, false
}

// MaxSnakeKeyBytes bounds a key SnakeKey returns.
const MaxSnakeKeyBytes = 64

// SnakeKey normalises a fact key to snake_case ASCII: lowercase letters,
// digits and single underscores, camelCase split into words, anything else a
// separator, at most MaxSnakeKeyBytes bytes. It returns "" when nothing is left.
// The extractors put the keys a model writes so, and the MCP fact tools
// the keys an agent gives, so that both name one fact.
func SnakeKey(s string) string { return snakeKey(s, MaxSnakeKeyBytes) }

// SnakeKeyTooLong reports whether s's snake_case form is over
// MaxSnakeKeyBytes, so that SnakeKey cuts it: two keys alike in their first
// 64 bytes are then one key. A caller naming a fact by such a key (an
// agent's tool call) is refused, not given another fact.
func SnakeKeyTooLong(s string) bool { return len(snakeKey(s, 2*len(s)+1)) > MaxSnakeKeyBytes }

func snakeKey(s string, limit int) string {
	var b strings.Builder
	pendingSep := false
	var prev rune
	for _, r := range s {
		orig := r
		switch {
		case r >= 'A' && r <= 'Z':
			if (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9') {
				pendingSep = true
			}
			r += 'a' - 'A'
			fallthrough
		case (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			if pendingSep && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingSep = false
			b.WriteRune(r)
		default:
			pendingSep = true
		}
		prev = orig
		if b.Len() >= limit {
			break
		}
	}
	key := b.String()
	if len(key) > limit {
		key = key[:limit]
	}
	return strings.Trim(key, "_")
}

// ListArray reads a list value written as a JSON array of strings
// ('["climbing","go"]': what a model or a script sends for a list) and
// returns its strings. bracketed says the value, trimmed, is in brackets;
// ok that it is such an array. Split at commas as a list value is, it gave
// the items `["climbing"` and `"go"]`.
func ListArray(value string) (strs []string, bracketed, ok bool) {
	t := strings.TrimSpace(value)
	if !strings.HasPrefix(t, "[") || !strings.HasSuffix(t, "]") {
		return nil, false, false
	}
	if json.Unmarshal([]byte(t), &strs) != nil {
		return nil, true, false
	}
	return strs, true, true
}
