package events

import (
	"maps"
	"slices"
)

// Languages (memory.language). A user's language chooses the Postgres text
// search configuration that indexes their context items and parses their
// searches: stemming and stop words for the languages Postgres stems, the
// "simple" configuration (words as written, lower-cased) for the others,
// under which text in Chinese, Japanese or Korean is also split into
// character bigrams, so that a word inside a sentence is found (see
// docs/protocol.md, "Languages").

// DefaultLanguage is the language of a user whose language was never set.
const DefaultLanguage = "en"

// stemmed maps the ISO 639-1 code of each language with a built-in Postgres
// (15) text search configuration to that configuration, which is also the
// language's English name.
var stemmed = map[string]string{
	"ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "da": "danish",
	"nl": "dutch", "en": "english", "fi": "finnish", "fr": "french", "de": "german",
	"el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ga": "irish",
	"it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
	"nn": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian",
	"es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}

// unstemmed maps the ISO 639-1 code of each language memoryd accepts
// without a Postgres stemmer to its English name; they all use "simple".
var unstemmed = map[string]string{
	"ja": "japanese", "zh": "chinese", "ko": "korean",
	"pl": "polish", "cs": "czech", "sk": "slovak", "uk": "ukrainian", "bg": "bulgarian",
	"hr": "croatian", "sl": "slovenian", "et": "estonian", "lv": "latvian",
	"he": "hebrew", "fa": "persian", "vi": "vietnamese", "ms": "malay",
	"th": "thai", "lo": "lao", "km": "khmer", "my": "burmese",
}

// SimpleConfig is the configuration of the languages Postgres does not stem.
const SimpleConfig = "simple"

// TextSearchConfig returns the Postgres text search configuration of a
// language named by its ISO 639-1 code ("de"), its English name ("german")
// or "simple", in lower case as listed in docs/protocol.md (Languages). ok
// is false for any other value, a region tag ("de-AT") or upper case
// included: a frontend maps its locale to the code.
func TextSearchConfig(language string) (config string, ok bool) {
	if c, ok := stemmed[language]; ok {
		return c, true
	}
	if _, ok := unstemmed[language]; ok || language == SimpleConfig {
		return SimpleConfig, true
	}
	for _, c := range stemmed {
		if language == c {
			return c, true
		}
	}
	for _, name := range unstemmed {
		if language == name {
			return SimpleConfig, true
		}
	}
	return "", false
}

// Languages returns every value TextSearchConfig accepts, sorted: the
// codes, the names and "simple".
func Languages() []string {
	seen := map[string]bool{SimpleConfig: true}
	for code, c := range stemmed {
		seen[code], seen[c] = true, true
	}
	for code, name := range unstemmed {
		seen[code], seen[name] = true, true
	}
	return slices.Sorted(maps.Keys(seen))
}

// LanguageConfigs returns every language memoryd accepts by its ISO 639-1
// code, mapped to its text search configuration.
func LanguageConfigs() map[string]string {
	m := make(map[string]string, len(stemmed)+len(unstemmed))
	maps.Copy(m, stemmed)
	for code := range unstemmed {
		m[code] = SimpleConfig
	}
	return m
}
