package agenttools

import "testing"

// TestFactKeyIsExtractionsKey: a key an agent gives in Latin letters with
// accents, or in compatibility characters, is the key the model extractor
// writes for the same words (extractor.modelKey: café_préféré is
// cafe_prefere, größe grosse), so that a later statement in conversation
// replaces the fact the agent set instead of standing next to it. Before,
// set_fact kept größe, café and ｎａｍｅ (not name) as facts of their own.
func TestFactKeyIsExtractionsKey(t *testing.T) {
	for in, want := range map[string]string{
		"Größe":         "grosse",
		"café préféré":  "cafe_prefere",
		"Ｎａｍｅ":          "name",
		"Ñame Größe":    "name_grosse",
		"cafe\u0301":    "cafe",
		"café":          "cafe",
		"Ville":         "ville",
		"年齢":            "年齢", // another script: kept, in lower case
		"favoriteColor": "favorite_color",
	} {
		got, _, err := factKey(in)
		if err != nil || got != want {
			t.Errorf("factKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
