package enricher

import (
	"context"
	"slices"
	"time"
	"unsafe"

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
	for i, m := range c.Matches {
		docs[i] = ranking.Doc{ID: m.Item.ID, CreatedAt: m.Item.CreatedAt, QuestionLen: m.QuestionLen, AnswerLen: m.AnswerLen,
			Terms: rankingCounts(m.Terms)}
	}
	hits := ranking.Rank(ranking.Collection(c.Stats), docs, ranking.Query{At: at, Threshold: threshold, Limit: limit, DF: c.DF})
	items := make([]store.ContextItem, len(hits))
	for i, h := range hits {
		items[i] = c.Matches[h.Doc].Item
		items[i].Score = h.Score
	}
	return items
}

// rankingCounts is counts as ranking's type, the same memory, not a copy:
// the two types have the same fields (the conversion below does not
// compile otherwise), and so the same layout. Ranking only reads them.
// Copied, they were half of Rank's time for a heavy user (3,600
// candidates of 30 query lexemes: BenchmarkRankManyCandidates).
func rankingCounts(counts []store.TermCount) []ranking.TermCount {
	_ = ranking.TermCount(store.TermCount{})
	return unsafe.Slice((*ranking.TermCount)(unsafe.Pointer(unsafe.SliceData(counts))), len(counts))
}

// Pruned reads (store.Prune): enrich's keyword-only read of all the user's
// items skips the lexemes held by more than pruneShare of a user's items,
// for a user of at least pruneMinItems. On real conversations most of a
// heavy user's candidates hold only such words ("like", "make", "time" are
// in a third to half of a LongMemEval user's items), and every candidate
// costs its aggregation, its join, its row and its ranking. The hits are
// always those of a full read: when the items read cannot tell (ExactRead),
// the rest are read (docs/performance.md, "A heavy user's candidates,
// pruned", where the share was chosen).
const (
	pruneShare    = 0.15
	pruneMinItems = 2000
)

// ReadPrune is the store.Prune of enrich's keyword-only reads.
func ReadPrune() store.Prune { return store.Prune{Share: pruneShare, MinItems: pruneMinItems} }

// ExactRead reports whether items, Rank's hits of c for threshold and
// limit, are those of a full read: c skipped no lexeme, or no item holding
// only skipped lexemes can score as much as a hit (ranking.MaxScore): its
// bound is under the threshold, or limit hits score more than it.
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

// ReadFunc reads a search's candidates, and for enrich the user's facts
// (store.Store's Recall, or SearchCandidates for a search).
type ReadFunc func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error)

// PrunedRead reads q's candidates (and facts) with read, pruned with p, and
// ranks them as Rank does (at, threshold, limit). When the read skipped
// lexemes and ExactRead cannot tell its hits are the full read's, it reads
// the rest of the candidates (store.Prune.Except: the items holding none
// of the lexemes kept) and ranks all of them, returning the second read's
// facts and the candidates of both (rest true). Either way the hits are
// those of a read of every candidate. The two reads are two snapshots: an
// item written or deleted between them may be missed or kept, as if the
// request had come a moment earlier or later. An item whose lexemes
// change between them (an edit, context.update, or a re-index: a change
// of the user's language when the query's lexemes are the same under both)
// could move from the rest's candidates to the first read's and be in
// neither; the user's generation (store.Candidates), which every such
// change moves, tells, and then every candidate is read again in one
// snapshot.
func PrunedRead(ctx context.Context, read ReadFunc, q store.SearchQuery, p store.Prune, at time.Time, threshold float64, limit int) (
	facts []store.Fact, c store.Candidates, items []store.ContextItem, rest bool, err error) {
	return prunedRead(ctx, read, q, p, at, threshold, limit, limit)
}

// prunedRead is PrunedRead ranking up to ranked items (at least limit),
// whose first limit are PrunedRead's: the reads and their exactness are
// judged on those, so that the items past them (enrich's reserves) cost no
// second ranking.
func prunedRead(ctx context.Context, read ReadFunc, q store.SearchQuery, p store.Prune, at time.Time, threshold float64, limit, ranked int) (
	facts []store.Fact, c store.Candidates, items []store.ContextItem, rest bool, err error) {
	q.Prune = p
	if facts, c, err = read(ctx, q); err != nil {
		return nil, store.Candidates{}, nil, false, err
	}
	items = Rank(c, at, threshold, ranked)
	if ExactRead(c, items[:min(len(items), limit)], threshold, limit) {
		return facts, c, items, false, nil
	}
	var kept []string
	for t, skipped := range c.Skipped {
		if !skipped {
			kept = append(kept, c.Terms[t])
		}
	}
	q.Prune = store.Prune{Except: kept}
	facts, more, err := read(ctx, q)
	if err != nil {
		return nil, store.Candidates{}, nil, true, err
	}
	if !slices.Equal(more.Terms, c.Terms) || more.Generation != c.Generation {
		// The user's language changed in between (its lexemes are not the
		// first read's), or an item did: read them all.
		q.Prune = store.Prune{}
		if facts, c, err = read(ctx, q); err != nil {
			return nil, store.Candidates{}, nil, true, err
		}
		return facts, c, Rank(c, at, threshold, ranked), true, nil
	}
	// Every candidate, counted by Rank: the second read's statistics, and
	// an item in both reads (its words changed in between) once, as now.
	seen := make(map[int64]bool, len(more.Matches))
	for _, m := range more.Matches {
		seen[m.Item.ID] = true
	}
	for _, m := range c.Matches {
		if !seen[m.Item.ID] {
			more.Matches = append(more.Matches, m)
		}
	}
	more.Texts = more.Texts && c.Texts
	return facts, more, Rank(more, at, threshold, ranked), true, nil
}
