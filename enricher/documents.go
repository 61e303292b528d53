package enricher

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/memoryd/memoryd/events"
)

// ChunkSearcher is what enrich reads documents with: the chunks of the
// named collections the owner may read (their own, and shared ones they are
// granted), matching keywords, best first, none under MinScore, at most
// Limit. A Config.Store that also implements it serves documents in enrich;
// otherwise a request naming collections is answered without documents.
type ChunkSearcher interface {
	SearchChunks(ctx context.Context, q chunkQuery) ([]chunkHit, error)
}

// checkCollections checks an enrich request's collections: at most
// MaxEnrichCollections names, each non-blank and at most
// MaxCollectionNameBytes; duplicates are dropped.
func checkCollections(names []string) ([]string, error) {
	if len(names) > events.MaxEnrichCollections {
		return nil, badRequest("collections: %d names, over the limit of %d", len(names), events.MaxEnrichCollections)
	}
	out := make([]string, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		switch {
		case strings.TrimSpace(n) == "":
			return nil, badRequest("collections: a name is empty")
		case len(n) > events.MaxCollectionNameBytes:
			return nil, badRequest("collections: name is %d bytes, over the %d byte limit", len(n), events.MaxCollectionNameBytes)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

// documents reads the chunks an enrich request asks for (none when it names
// no collections or the store serves no documents), as wire chunks, best
// first.
func (s *Service) documents(ctx context.Context, p enrichParams) ([]events.DocumentChunk, error) {
	if len(p.collections) == 0 || s.docs == nil {
		return []events.DocumentChunk{}, nil
	}
	hits, err := s.docs.SearchChunks(ctx, chunkQuery{
		Owner:       p.userID,
		Collections: p.collections,
		Keywords:    p.keywords,
		Limit:       p.docsMaxResults,
		MinScore:    p.docsThreshold,
	})
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	out := make([]events.DocumentChunk, len(hits))
	for i, h := range hits {
		hp := h.HeadingPath
		if hp == nil {
			hp = []string{}
		}
		out[i] = events.DocumentChunk{
			Collection:  h.CollectionName,
			DocumentID:  h.DocumentID,
			Source:      h.Source,
			HeadingPath: hp,
			ChunkIndex:  h.ChunkIndex,
			Text:        h.Text,
			Score:       math.Round(h.Score*1e6) / 1e6,
		}
	}
	return out, nil
}
