package ranking_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/memoryd/memoryd/ranking"
)

// benchDocs is a fixed candidate set the size of a user's larger searches:
// n items over a year, about a third in runs of adjacent turns a minute
// apart, each holding some of 6 query lexemes.
func benchDocs(n int) []ranking.Doc {
	rng := rand.New(rand.NewPCG(17, 4))
	docs := make([]ranking.Doc, n)
	counts := make([]ranking.TermCount, n*6)
	t := at.Add(-365 * day)
	for i := range docs {
		if rng.IntN(3) == 0 {
			t = t.Add(time.Minute)
		} else {
			t = t.Add(time.Duration(rng.IntN(int(2 * day))))
		}
		terms := counts[i*6 : i*6+6 : i*6+6]
		for j := range terms {
			if rng.IntN(3) == 0 {
				terms[j] = ranking.TermCount{Present: true, Question: rng.Int32N(2), Answer: rng.Int32N(3)}
			}
		}
		docs[i] = ranking.Doc{ID: int64(i), CreatedAt: t, QuestionLen: 1 + rng.IntN(20), AnswerLen: rng.IntN(200), Terms: terms}
	}
	return docs
}

// BenchmarkRank is the ranking alone (no store) of 500 candidates to the
// top 10, with the default constants.
func BenchmarkRank(b *testing.B) {
	docs := benchDocs(500)
	coll := ranking.Collection{Items: 2000, AvgQuestionLen: 10, AvgAnswerLen: 100}
	q := ranking.Query{At: at, Limit: 10}
	b.ReportAllocs()
	for b.Loop() {
		ranking.Rank(coll, docs, q)
	}
}

// BenchmarkRankNeighbours is BenchmarkRank with the neighbour penalty on
// (off by default), to show its cost.
func BenchmarkRankNeighbours(b *testing.B) {
	docs := benchDocs(500)
	coll := ranking.Collection{Items: 2000, AvgQuestionLen: 10, AvgAnswerLen: 100}
	q := ranking.Query{At: at, Limit: 10}
	p := ranking.DefaultParams()
	p.NeighbourPenalty = 0.2
	b.ReportAllocs()
	for b.Loop() {
		p.Rank(coll, docs, q)
	}
}
