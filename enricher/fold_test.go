package enricher_test

import (
	"slices"
	"testing"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEnrichFoldsAccents: a question typed without accents finds the turn
// said with them, and the reverse (migration 058). A search walk on real
// conversations asked "which pokemon game was i playing?" and missed "I'm
// playing Pokémon Sword on the Switch". Facts sharing a word with the
// message are selected across accents too, and a word said both ways in
// one message is one keyword.
func TestEnrichFoldsAccents(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	const (
		pokemon = "Just started Pokémon Sword on my Switch"
		resume  = "I updated my resume for the design job"
		tennis  = "I was playing tennis with Tom"
		match   = "We watched the game at a bar"
	)
	insertContext(t, st,
		store.ContextWrite{UserID: "ana", Question: pokemon, Answer: "Fun! Which starter did you pick?", CreatedAt: t0},
		store.ContextWrite{UserID: "ana", Question: resume, Answer: "Good luck with it.", CreatedAt: t0},
		store.ContextWrite{UserID: "ana", Question: tennis, Answer: "Who won?", CreatedAt: t0},
		store.ContextWrite{UserID: "ana", Question: match, Answer: "Sounds lovely.", CreatedAt: t0},
	)
	upsertFacts(t, st,
		store.FactWrite{UserID: "ana", Key: "favorite_place", Value: "Café Nero on Main Street", SourceAt: t0, EventID: "e1"},
		store.FactWrite{UserID: "ana", Key: "hometown", Value: "Málaga", SourceAt: t0, EventID: "e2"},
		store.FactWrite{UserID: "ana", Key: "plant", Value: "monstera", SourceAt: t0, EventID: "e3"},
	)
	for _, c := range []struct {
		message string
		item    string
		fact    string
	}{
		{"which pokemon game was i playing?", pokemon, ""},
		{"what did I change in my résumé?", resume, ""},
		{"is the cafe open on sunday?", "", "favorite_place"},
		{"any good beaches near Malaga?", "", "hometown"},
	} {
		r := enrich(t, h, events.EnrichRequest{UserID: "ana", Message: c.message})
		if c.item != "" && !slices.ContainsFunc(r.Context, func(i events.ContextItem) bool { return i.Question == c.item }) {
			t.Errorf("%q: context %+v, want %q", c.message, r.Context, c.item)
		}
		var keys []string
		for _, f := range r.Facts {
			keys = append(keys, f.Key)
		}
		if c.fact != "" && !slices.Contains(keys, c.fact) {
			t.Errorf("%q: facts %q, want %q", c.message, keys, c.fact)
		}
		if slices.Contains(keys, "plant") {
			t.Errorf("%q: facts %q hold an unrelated one", c.message, keys)
		}
	}
	if got := enricher.Keywords("Café or cafe? The café!"); !slices.Equal(got, []string{"café"}) {
		t.Errorf("keywords %q, want one for café and cafe", got)
	}
}
