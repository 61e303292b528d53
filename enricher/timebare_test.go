package enricher

import (
	"slices"
	"testing"
	"time"
)

func TestBareForms(t *testing.T) {
	for _, c := range []struct {
		word   string
		german bool
		want   []string
	}{
		{"tydzień", false, []string{"tydzien"}},
		{"zeszłym", false, []string{"zeszlym"}},
		{"październik", false, []string{"pazdziernik"}},
		{"dernière", false, []string{"derniere"}},
		{"año", false, []string{"ano"}},
		{"mês", false, []string{"mes"}},
		{"märz", true, []string{"marz", "maerz"}},
		{"nächste", true, []string{"nachste", "naechste"}},
		{"straße", true, []string{"strasse"}},
		{"sœur", false, []string{"soeur"}},
		{"ещё", false, []string{"еще"}},
		{"прошлой", false, nil}, // й is a letter of its own, not и with a mark
		{"week", false, nil},
		{"dernie\u0300re", false, []string{"derniere"}}, // a combining mark
	} {
		if got := bareForms(c.word, c.german); !slices.Equal(got, c.want) {
			t.Errorf("bareForms(%q, %v) = %q, want %q", c.word, c.german, got, c.want)
		}
	}
}

// checkParseTimeBare runs checkParseTime on cases, and again on each
// case's message typed without its diacritics (bareOf; German also with
// its umlauts as ae, oe, ue), which must read the same range. Before,
// "w zeszlym tygodniu", "la semaine derniere", "el ano pasado" and
// "im Maerz" read nothing, and their words were searched across all time.
func checkParseTimeBare(t *testing.T, at time.Time, cases []parseCase) {
	t.Helper()
	checkParseTime(t, at, cases)
	var bare []parseCase
	for _, c := range cases {
		for _, umlauts := range []bool{false, true} {
			b := parseCase{bareOf(c.msg, umlauts), c.since, c.until, bareOf(c.expr, umlauts)}
			if b.msg != c.msg && !slices.Contains(bare, b) {
				bare = append(bare, b)
			}
		}
	}
	if len(bare) == 0 {
		t.Fatal("no case has diacritics")
	}
	checkParseTime(t, at, bare)
}

// checkTimeRestBare runs checkTimeRest on cases and on their messages
// typed without diacritics: the same words asked, bare, and the same
// small talk ("Dziekuje za dzisiaj!", "De quoi avons-nous parle la semaine
// derniere ?").
func checkTimeRestBare(t *testing.T, cases []restCase) {
	t.Helper()
	checkTimeRest(t, cases)
	var bare []restCase
	for _, c := range cases {
		for _, umlauts := range []bool{false, true} {
			b := restCase{msg: bareOf(c.msg, umlauts), smallTalk: c.smallTalk, asked: []string{}}
			for _, w := range c.asked {
				b.asked = append(b.asked, bareOf(w, umlauts))
			}
			if b.msg != c.msg && !slices.ContainsFunc(bare, func(o restCase) bool { return o.msg == b.msg }) {
				bare = append(bare, b)
			}
		}
	}
	checkTimeRest(t, bare)
}
