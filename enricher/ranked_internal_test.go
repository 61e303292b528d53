package enricher

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// BenchmarkRankManyCandidates is Rank alone on a heavy user's keyword read:
// 3,600 candidates of 30 query lexemes, each holding two of them (a pruned
// read of new messages for a user of 6,972 LongMemEval-S items brought
// 3,609 at p50; docs/performance.md).
func BenchmarkRankManyCandidates(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, terms = 3600, 30
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	c := store.Candidates{Stats: store.ItemStats{Items: 7000, AvgQuestionLen: 12, AvgAnswerLen: 150}, Terms: make([]string, terms),
		Matches: make([]store.Candidate, n)}
	counts := make([]store.TermCount, n*terms)
	for i := range c.Matches {
		m := &c.Matches[i]
		m.Item = store.ContextItem{ID: int64(i), CreatedAt: at.Add(-time.Duration(rng.IntN(1e6)) * time.Second)}
		m.QuestionLen, m.AnswerLen = 5+rng.IntN(20), 20+rng.IntN(300)
		m.Terms = counts[i*terms : (i+1)*terms : (i+1)*terms]
		for range 2 {
			m.Terms[rng.IntN(terms)] = store.TermCount{Present: true, Question: rng.Int32N(2), Answer: rng.Int32N(4)}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if len(Rank(c, at, 0.3, 3)) == 0 {
			b.Fatal("no hits")
		}
	}
}
