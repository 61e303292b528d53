package ranking_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/ranking"
)

// TestMaxScoreBoundsOnlyMarkedTerms: no doc holding only the marked terms
// reaches MaxScore's bound, whatever its counts, field lengths and age,
// while a doc holding an unmarked term can pass it (the bound is not
// trivially 1); and the answer weight a query uses does not matter.
func TestMaxScoreBoundsOnlyMarkedTerms(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	coll := ranking.Collection{Items: 5000, AvgQuestionLen: 12, AvgAnswerLen: 90}
	df := []int{40, 1200, 2600, 3100}
	only := []bool{false, true, true, true}
	bound, ok := ranking.DefaultParams().MaxScore(coll, df, only)
	if !ok || !(bound > 0 && bound < 1) {
		t.Fatalf("MaxScore = %v, %v; want a bound in (0, 1)", bound, ok)
	}
	best := 0.0
	for range 2000 {
		d := ranking.Doc{ID: 1, CreatedAt: at.Add(-time.Duration(r.IntN(1000)) * time.Hour),
			QuestionLen: 1 + r.IntN(3), AnswerLen: r.IntN(4), Terms: make([]ranking.TermCount, len(df))}
		for i := 1; i < len(df); i++ {
			d.Terms[i] = ranking.TermCount{Present: true, Question: r.Int32N(300), Answer: r.Int32N(300)}
		}
		for _, asks := range []bool{false, true} {
			for _, h := range ranking.Rank(coll, []ranking.Doc{d}, ranking.Query{At: at, Limit: 1, DF: df, AsksReply: asks}) {
				best = max(best, h.Score)
			}
		}
	}
	if best >= bound {
		t.Errorf("a doc holding only marked terms scored %v, not under the bound %v", best, bound)
	}
	if best < bound*0.9 {
		t.Errorf("the best doc of marked terms scored %v: the test never came near the bound %v", best, bound)
	}
	rare := doc(2, 0, q(3), q(1), absent, absent)
	rare.QuestionLen = 1
	if h := ranking.Rank(coll, []ranking.Doc{rare}, ranking.Query{At: at, Limit: 1, DF: df}); len(h) != 1 || h[0].Score <= bound {
		t.Errorf("a doc holding the rare unmarked term scored %v, want above the bound %v", h, bound)
	}

	// Nothing marked: an item holding none of the query's lexemes.
	if b, ok := ranking.DefaultParams().MaxScore(coll, df, make([]bool, len(df))); !ok || b != 0 {
		t.Errorf("MaxScore of no term = %v, %v; want 0, true", b, ok)
	}
}

// TestMaxScoreRefusesCandidateDependentScores: with any constant that
// makes a hit's score depend on the other candidates, a pruned read cannot
// be exact, and MaxScore says so.
func TestMaxScoreRefusesCandidateDependentScores(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		set  func(*ranking.Params)
	}{
		{"NeighbourPenalty", func(p *ranking.Params) { p.NeighbourPenalty = 0.1 }},
		{"LaterPenalty", func(p *ranking.Params) { p.LaterPenalty = 0.1 }},
		{"SessionWeight", func(p *ranking.Params) { p.SessionWeight = 0.1 }},
		{"CoveragePower", func(p *ranking.Params) { p.CoveragePower = 1 }},
		// Constants the bound does not hold for: with either, a doc holding
		// a marked term of df 1,200 of 5,000 once in a question and three
		// times in an answer, both of length 1, scored 0.655 and 0.622
		// against the bound 0.557.
		{"a negative RecencyWeight", func(p *ranking.Params) { p.RecencyWeight = -0.5 }},
		{"a negative AnswerWeight", func(p *ranking.Params) { p.AnswerWeight = -1 }},
	} {
		p := ranking.DefaultParams()
		tt.set(&p)
		if _, ok := p.MaxScore(ranking.Collection{Items: 10, AvgQuestionLen: 1, AvgAnswerLen: 1}, []int{1}, []bool{true}); ok {
			t.Errorf("%s: MaxScore reported a bound", tt.name)
		}
	}
}

// TestRankWithDF: given every lexeme's document frequency, Rank scores a
// subset of the candidates as it scores them among all of them, so that
// the hits of a pruned read that holds them are the full read's.
func TestRankWithDF(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 40, AvgQuestionLen: 3, AvgAnswerLen: 5}
	all := []ranking.Doc{
		doc(1, day, q(1), absent), doc(2, 2*day, absent, a(1)), doc(3, 3*day, absent, q(2)),
		doc(4, 4*day, q(1), a(1)), doc(5, 5*day, absent, a(3)), doc(6, 6*day, absent, q(1)),
	}
	df := []int{2, 5}
	full := ranking.Rank(coll, all, ranking.Query{At: at, Limit: 3})
	// The pruned read: only the docs holding term 0.
	sub := []ranking.Doc{all[0], all[3]}
	pruned := ranking.Rank(coll, sub, ranking.Query{At: at, Limit: 3, DF: df})
	scores := func(docs []ranking.Doc, hits []ranking.Hit) map[int64]float64 {
		m := map[int64]float64{}
		for _, h := range hits {
			m[docs[h.Doc].ID] = h.Score
		}
		return m
	}
	want, got := scores(all, full), scores(sub, pruned)
	for id, s := range got {
		if want[id] != s {
			t.Errorf("doc %d scored %v from the subset with DF, %v among all", id, s, want[id])
		}
	}
	// Without DF the subset's own counts change the idf: the test tells.
	counted := scores(sub, ranking.Rank(coll, sub, ranking.Query{At: at, Limit: 3}))
	if same := slices.Equal(sortedScores(counted), sortedScores(got)); same {
		t.Errorf("the subset scored the same without DF (%v): the test cannot tell DF is used", counted)
	}
}

func sortedScores(m map[int64]float64) []float64 {
	var out []float64
	for _, s := range m {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
