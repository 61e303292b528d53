package main

import (
	"reflect"
	"testing"

	"github.com/memoryd/memoryd/ranking"
)

func TestDropWords(t *testing.T) {
	has := func(q int32) ranking.TermCount { return ranking.TermCount{Present: true, Question: q} }
	none := ranking.TermCount{}
	input := func(kws ...string) cvInput {
		return cvInput{Keywords: kws, Terms: []string{"dog", "walk"}, Matches: []cvMatch{
			{ID: 1, Counts: []ranking.TermCount{has(1), none}},
			{ID: 2, Counts: []ranking.TermCount{none, has(2)}},
			{ID: 3, Counts: []ranking.TermCount{has(1), has(1)}},
		}}
	}
	c := &cvCache{Sets: []string{"s"}, Lexemes: map[string][]string{"dogs": {"dog"}, "walking": {"walk"}}}
	c.Inputs = []cvInput{input("dogs", "walking"), input("walking"), input("dogs", "walking")}
	c.Inputs[2].Newest = []string{"e1"}
	orig := c.Inputs[0].Matches[2].Counts[1]

	got, changed := dropWords(c, []string{"walking"})
	if changed != 1 {
		t.Fatalf("changed = %d, want 1 (the second question would search with no keyword, the third is a time-only answer)", changed)
	}
	q := got.Inputs[0]
	if !reflect.DeepEqual(q.Keywords, []string{"dogs"}) {
		t.Errorf("keywords = %v, want [dogs]", q.Keywords)
	}
	var ids []int64
	for _, m := range q.Matches {
		ids = append(ids, m.ID)
		if m.Counts[1] != none {
			t.Errorf("candidate %d still counts walk: %+v", m.ID, m.Counts)
		}
	}
	if !reflect.DeepEqual(ids, []int64{1, 3}) {
		t.Errorf("candidates = %v, want [1 3] (2 held only walk)", ids)
	}
	for i := 1; i < 3; i++ {
		if !reflect.DeepEqual(got.Inputs[i], c.Inputs[i]) {
			t.Errorf("question %d changed: %+v", i, got.Inputs[i])
		}
	}
	if c.Inputs[0].Matches[2].Counts[1] != orig || len(c.Inputs[0].Matches) != 3 || len(c.Inputs[0].Keywords) != 2 {
		t.Error("dropWords changed the cache it was given")
	}
}
