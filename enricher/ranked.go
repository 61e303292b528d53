package enricher

import (
	"time"

	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// Rank orders a search's candidates (see package ranking) and returns the
// items scoring at least threshold, best first, at most limit, each with its
// Score. Recency is measured at at; zero means now. The result is never nil.
func Rank(c store.Candidates, at time.Time, threshold float64, limit int) []store.ContextItem {
	if at.IsZero() {
		at = time.Now()
	}
	docs := make([]ranking.Doc, len(c.Matches))
	counts := make([]ranking.TermCount, 0, len(c.Matches)*len(c.Terms))
	for i, m := range c.Matches {
		start := len(counts)
		for _, n := range m.Terms {
			counts = append(counts, ranking.TermCount(n))
		}
		docs[i] = ranking.Doc{ID: m.Item.ID, CreatedAt: m.Item.CreatedAt, QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen,
			Terms: counts[start:len(counts):len(counts)]}
	}
	hits := ranking.Rank(ranking.Collection(c.Stats), docs, ranking.Query{At: at, Threshold: threshold, Limit: limit})
	items := make([]store.ContextItem, len(hits))
	for i, h := range hits {
		items[i] = c.Matches[h.Doc].Item
		items[i].Score = h.Score
	}
	return items
}
