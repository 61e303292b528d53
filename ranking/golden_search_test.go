package ranking_test

import (
	"context"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/store"
)

// goldenSearch runs q the way enrich and search do: the store's candidates,
// then the ranking, then (Recall's candidates carry no texts) the texts of
// the items kept, as enrich reads them.
func goldenSearch(ctx context.Context, s *store.Store, q goldenQuery) ([]store.ContextItem, error) {
	sq := store.SearchQuery{UserID: q.userID, Keywords: q.keywords}
	var (
		c   store.Candidates
		err error
	)
	if q.recall {
		_, c, err = s.Recall(ctx, store.RecallQuery{SearchQuery: sq, MaxFacts: 5})
	} else {
		c, err = s.SearchContext(ctx, sq)
	}
	if err != nil {
		return nil, err
	}
	items := enricher.Rank(c, q.at, q.threshold, q.limit)
	if q.recall {
		return s.ContextTexts(ctx, q.userID, items)
	}
	return items, nil
}
