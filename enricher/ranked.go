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
	hits := ranking.Rank(ranking.Collection(c.Stats), docs, ranking.Query{At: at, Threshold: threshold, Limit: limit, DF: c.DF})
	items := make([]store.ContextItem, len(hits))
	for i, h := range hits {
		items[i] = c.Matches[h.Doc].Item
		items[i].Score = h.Score
	}
	return items
}

// Pruned reads (store.Prune): enrich's keyword-only read of all the user's
// items skips the lexemes held by more than pruneShare of a user's items,
// for a user of at least pruneMinItems. On real conversations most of a
// heavy user's candidates hold only such words ("like", "make", "time" are
// in a third to half of a LongMemEval user's items), and every candidate
// costs its aggregation, its join, its row and its ranking; the hits are
// those of the full read whenever exactRead says so, else the full read
// is made (docs/performance.md, "A heavy user's candidates, pruned").
const (
	pruneShare    = 0.20
	pruneMinItems = 2000
)

// ReadPrune is the store.Prune of enrich's keyword-only reads.
func ReadPrune() store.Prune { return store.Prune{Share: pruneShare, MinItems: pruneMinItems} }

// ExactRead reports whether items, Rank's hits of c for threshold and
// limit, are those of a full read: c skipped no lexeme, or no item holding
// only skipped lexemes can score as much as a hit (ranking.MaxScore): its
// bound is under the threshold, or limit hits score more than it. When it
// reports false, enrich reads every candidate (no Prune) and ranks again.
func ExactRead(c store.Candidates, items []store.ContextItem, threshold float64, limit int) bool {
	if c.Skipped == nil {
		return true
	}
	bound, ok := ranking.DefaultParams().MaxScore(ranking.Collection(c.Stats), c.DF, c.Skipped)
	if !ok {
		return false
	}
	return bound < threshold || (limit > 0 && len(items) == limit && items[limit-1].Score > bound)
}
