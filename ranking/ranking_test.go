package ranking_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/ranking"
)

var at = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// doc is a candidate with question and answer of the test collection's
// mean lengths (3 and 5), created age before at.
func doc(id int64, age time.Duration, terms ...ranking.TermCount) ranking.Doc {
	return ranking.Doc{ID: id, CreatedAt: at.Add(-age), QuestionLen: 3, AnswerLen: 5, Terms: terms}
}

// q and a are a term found n times in the question or the answer.
func q(n int32) ranking.TermCount { return ranking.TermCount{Present: true, Question: n} }
func a(n int32) ranking.TermCount { return ranking.TermCount{Present: true, Answer: n} }

var absent = ranking.TermCount{}

// score is the documented score of a doc in a collection of n items, for
// terms of the given document frequencies and field-weighted frequencies f,
// at the given age.
func score(n float64, age time.Duration, dfs, fs []float64) float64 {
	s := 0.0
	for i, df := range dfs {
		idf := math.Log(1 + (n+ranking.IDFPrior-df+0.5)/(df+0.5))
		s += idf * fs[i] * (ranking.K1 + 1) / (fs[i] + ranking.K1)
	}
	days := age.Hours() / 24
	return s / (s + ranking.RelevanceHalf) * (1 - ranking.RecencyWeight + ranking.RecencyWeight/(1+days/ranking.RecencyDays))
}

func TestRank(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 10, AvgQuestionLen: 3, AvgAnswerLen: 5}
	all := ranking.Query{At: at, Limit: 100}
	// f of one answer match in an answer of mean length.
	fa := ranking.AnswerWeight
	// f of one match in a question twice the mean length: 1/(1 − B + 2B).
	long := 1 / (1 + ranking.B)
	tests := []struct {
		name   string
		coll   ranking.Collection
		docs   []ranking.Doc
		q      ranking.Query
		want   []int64   // hit ids, in order
		scores []float64 // when set, the hits' scores
	}{
		{"none", coll, nil, all, []int64{}, nil},
		{"one question match", coll, []ranking.Doc{doc(1, 0, q(1))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{1})}},
		{"recency: 30 days", coll, []ranking.Doc{doc(1, 30*day, q(1))}, all, []int64{1},
			[]float64{score(10, 30*day, []float64{1}, []float64{1})}},
		{"newer than at counts as fresh", coll, []ranking.Doc{doc(1, -day, q(1))}, all, []int64{1},
			[]float64{score(10, 0, []float64{1}, []float64{1})}},
		{"question before answer", coll, []ranking.Doc{doc(1, 0, a(1)), doc(2, 0, q(1))}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{1}), score(10, 0, []float64{2}, []float64{fa})}},
		{"repeats saturate", coll, []ranking.Doc{doc(1, 0, q(1)), doc(2, 0, q(3))}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{3}), score(10, 0, []float64{2}, []float64{1})}},
		{"short question before long", coll, []ranking.Doc{
			{ID: 1, CreatedAt: at, QuestionLen: 6, AnswerLen: 5, Terms: []ranking.TermCount{q(1)}},
			doc(2, 0, q(1)),
		}, all, []int64{2, 1},
			[]float64{score(10, 0, []float64{2}, []float64{1}), score(10, 0, []float64{2}, []float64{long})}},
		{"two terms sum", coll, []ranking.Doc{doc(1, 0, q(1), a(1)), doc(2, 0, absent, a(1))}, all, []int64{1, 2},
			[]float64{score(10, 0, []float64{1, 2}, []float64{1, fa}), score(10, 0, []float64{2}, []float64{fa})}},
		{"rare term before common", coll, []ranking.Doc{
			doc(1, 0, q(1), absent), doc(2, 0, q(1), absent), doc(3, 0, q(1), absent), doc(4, 0, absent, q(1)),
		}, all, []int64{4, 3, 2, 1}, nil},
		{"equal scores: newest, then highest id", coll, []ranking.Doc{
			doc(1, 0, q(1)), doc(2, day, q(1)), doc(3, 0, q(1)),
		}, all, []int64{3, 1, 2}, nil},
		{"recency is bounded: a year-old strong match first", coll, []ranking.Doc{
			doc(1, 365*day, q(1), q(1), q(1)), doc(2, 0, absent, absent, a(1)),
		}, all, []int64{1, 2}, nil},
		{"a doc without terms is dropped", coll, []ranking.Doc{doc(1, 0, absent), doc(2, 0), doc(3, 0, q(1))}, all, []int64{3}, nil},
		{"present without positions: a match scoring 0, counted in df", coll, []ranking.Doc{
			doc(1, 0, ranking.TermCount{Present: true}), doc(2, 0, q(1)),
		}, all, []int64{2, 1}, []float64{score(10, 0, []float64{2}, []float64{1}), 0}},
		{"threshold", coll, []ranking.Doc{doc(1, 0, a(1)), doc(2, 0, q(1))},
			ranking.Query{At: at, Limit: 10, Threshold: score(10, 0, []float64{2}, []float64{1})}, []int64{2}, nil},
		{"limit", coll, []ranking.Doc{doc(1, 0, a(1)), doc(2, 0, q(1)), doc(3, 0, q(2))},
			ranking.Query{At: at, Limit: 2}, []int64{3, 2}, nil},
		{"limit 0", coll, []ranking.Doc{doc(1, 0, q(1))}, ranking.Query{At: at}, []int64{}, nil},
		{"negative limit", coll, []ranking.Doc{doc(1, 0, q(1))}, ranking.Query{At: at, Limit: -1}, []int64{}, nil},
		{"many items make a term common", ranking.Collection{Items: 1000, AvgQuestionLen: 3, AvgAnswerLen: 5},
			[]ranking.Doc{doc(1, 0, q(1))}, all, []int64{1}, []float64{score(1000, 0, []float64{1}, []float64{1})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits := ranking.Rank(tt.coll, tt.docs, tt.q)
			ids := make([]int64, len(hits))
			for i, h := range hits {
				ids[i] = tt.docs[h.Doc].ID
			}
			if !slices.Equal(ids, tt.want) {
				t.Fatalf("ranked %v (%+v), want %v", ids, hits, tt.want)
			}
			for i, want := range tt.scores {
				if math.Abs(hits[i].Score-want) > 1e-12 {
					t.Fatalf("hit %d scores %.15f, want %.15f", i, hits[i].Score, want)
				}
			}
		})
	}
}

// TestRankDocumentedFigures checks the figures the package documentation
// gives, so that they stay true when a constant changes.
func TestRankDocumentedFigures(t *testing.T) {
	t.Parallel()
	coll := ranking.Collection{Items: 100, AvgQuestionLen: 3, AvgAnswerLen: 5}
	rank := func(docs ...ranking.Doc) float64 {
		t.Helper()
		hits := ranking.Rank(coll, docs, ranking.Query{At: at, Limit: 1000})
		if len(hits) == 0 {
			t.Fatal("no hit")
		}
		return hits[0].Score
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.01 {
			t.Errorf("%s scores %.3f, documented %.2f", name, got, want)
		}
	}
	near("a keyword held by one item in a hundred, in its question", rank(doc(1, 0, q(1))), 0.64)
	near("the same only in the answer", rank(doc(1, 0, a(1))), 0.56)
	third := make([]ranking.Doc, 33)
	for i := range third {
		third[i] = doc(int64(i), 0, q(1))
	}
	near("a keyword in a third of the items, in a question", rank(third...), 0.34)
	// A user's only memory, matched in its question, passes the default
	// enrich threshold (0.3) a year later.
	if got := ranking.Rank(ranking.Collection{Items: 1, AvgQuestionLen: 3, AvgAnswerLen: 5},
		[]ranking.Doc{doc(1, 365*day, q(1))}, ranking.Query{At: at, Limit: 1}); len(got) != 1 || got[0].Score < 0.3 {
		t.Fatalf("a year-old exact question match: %+v, want a score of at least 0.3", got)
	}
}
