package extractor

import (
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/internal/factkey"
)

// droppedKey is a fact key of a model's reply that was dropped as unusable,
// as the model wrote it, and why.
type droppedKey struct {
	key, why string
}

// Why a model's fact key is dropped (modelKey).
const (
	whyNotLatin = "letters outside the Latin alphabet (keys are English snake_case)"
	whyNoWords  = "no letters or digits"
)

// modelKey returns the snake_case key (events.SnakeKey) a model's fact key
// names, or "" and why it is dropped. Keys are snake_case ASCII, and the
// prompt asks for English ones; a model that writes its key in the user's
// language must not have it mangled (SnakeKey makes every other letter a
// separator: "größe" was "gr_e", "café_préféré" "caf_pr_f_r"). So a Latin
// letter with an accent is spelled without it ("café_préféré" is
// cafe_prefere, "größe" grosse: what a writer without the keys would type),
// and a key holding a letter or digit of another script ("年齢", "user_年齢")
// is dropped whole: no spelling of it in ASCII would be read as the same
// key, and a part of it ("user") would be another fact.
func modelKey(name string) (key, why string) {
	folded, ok := factkey.FoldLatin(name)
	if !ok {
		return "", whyNotLatin
	}
	if key = events.SnakeKey(folded); key == "" {
		return "", whyNoWords
	}
	return key, ""
}
