package enricher

import (
	"time"

	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// rankChunks ranks a chunk search's candidates as memory.docs.search does
// (branch docs' RankChunks); TEMPORARY: replaced by RankChunks once that
// branch's enricher side is merged.
func rankChunks(c store.ChunkCandidates, threshold float64, limit int) []store.ChunkHit {
	if len(c.Matches) == 0 || limit < 1 {
		return []store.ChunkHit{}
	}
	at := time.Unix(0, 0)
	docs := make([]ranking.Doc, len(c.Matches))
	for i, m := range c.Matches {
		terms := make([]ranking.TermCount, len(m.Terms))
		for j, t := range m.Terms {
			terms[j] = ranking.TermCount(t)
		}
		docs[i] = ranking.Doc{ID: int64(i), CreatedAt: at, QuestionLen: m.HeadingLen, AnswerLen: m.TextLen, Terms: terms}
	}
	hits := ranking.Rank(ranking.Collection(c.Stats), docs, ranking.Query{At: at, Threshold: threshold, Limit: limit})
	out := make([]store.ChunkHit, len(hits))
	for i, h := range hits {
		out[i] = c.Matches[h.Doc].Hit
		out[i].Score = h.Score
	}
	return out
}
