package ranking_test

import (
	"context"

	"github.com/memoryd/memoryd/store"
)

// goldenSearch runs q the way enrich and search do.
func goldenSearch(ctx context.Context, s *store.Store, q goldenQuery) ([]store.ContextItem, error) {
	sq := store.SearchQuery{UserID: q.userID, Keywords: q.keywords, At: q.at, Threshold: q.threshold, Limit: q.limit}
	if q.recall {
		_, items, err := s.Recall(ctx, store.RecallQuery{SearchQuery: sq, MaxFacts: 5})
		return items, err
	}
	return s.SearchContext(ctx, sq)
}
