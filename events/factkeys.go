package events

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

// factKeys is the vocabulary. Being built (issue 16 item 2).
var factKeys = []FactKeyInfo{
	{Key: "name", Core: true, Doc: "the user's name"},
	{Key: "location", Core: true, Aliases: []string{"city"}, Doc: "where the user lives"},
	{Key: "allergies", List: true, Aliases: []string{"allergy", "food_allergy", "food_allergies"}, Doc: "what the user is allergic to"},
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

// FactKeys returns the canonical vocabulary, in documentation order.
func FactKeys() []FactKeyInfo {
	return append([]FactKeyInfo(nil), factKeys...)
}

// CanonicalFactKey returns the canonical form of a snake_case key (itself
// when the vocabulary has no entry for it) and whether it is list-valued.
func CanonicalFactKey(key string) (canonical string, list bool) {
	if i, ok := factKeyIndex[key]; ok {
		return factKeys[i].Key, factKeys[i].List
	}
	return key, false
}
