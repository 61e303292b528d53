package enricher

import (
	"context"
	"slices"
	"testing"
)

type noStopWords struct{}

func (noStopWords) StopWords(context.Context, string, []string) (map[string]bool, error) {
	return nil, nil
}

// TestLanguageRecapLeavesEuropeanGrammarOut: a French message long enough
// to be capped, from a user with no language set (whose stop words are
// English), is capped again without its grammar words, as its first cap
// was filtered (withoutEuropeanGrammar). Before, the recap (enrich's
// languageKeywords, search's) brought back que, mon, est, nous and une.
func TestLanguageRecapLeavesEuropeanGrammarOut(t *testing.T) {
	t.Parallel()
	msg := "aujourd'hui je suis allé avec mon frère et ma sœur chez notre grand-mère qui habite dans une petite maison " +
		"près de la rivière avec trois chats noirs deux chiens blancs une chèvre têtue quelques poules rousses beaucoup " +
		"de lapins gris plusieurs canards sauvages puis nous avons mangé une tarte aux pommes délicieuse que elle avait " +
		"préparée pour nous est-ce que tu te souviens de mon vélo rouge"
	kws, over := keywords(msg)
	if over == nil {
		t.Fatalf("keywords %v: not capped, the test needs a longer message", kws)
	}
	capped, err := languageRecap(context.Background(), noStopWords{}, "u", europeanGrammar(msg), over)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"que", "mon", "est", "nous", "une"} {
		if slices.Contains(capped[0], g) {
			t.Errorf("recap %v keeps the grammar word %q", capped[0], g)
		}
	}
	if !slices.Contains(capped[0], "vélo") {
		t.Errorf("recap %v lost the subject", capped[0])
	}
}
