package enricher

import (
	"context"
	"errors"
	"math"
	"strings"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// ChunkSearcher is what enrich reads documents with (a part of DocStore):
// the candidate chunks of the named collections the reader may read (their
// own, and shared ones they are granted), store.ErrNoCollection for one
// they may not.
type ChunkSearcher interface {
	SearchChunks(ctx context.Context, q store.ChunkQuery, rank store.ChunkRanker) ([]store.ChunkHit, error)
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

// documents reads the chunks an enrich request asks for (of the user's
// default collections when it has no collections field, none when it is
// empty), ranked as memory.docs.search ranks them (RankChunks, or hybrid
// with the request's query vector: dochybrid.go), as wire chunks, best
// first.
func (s *Service) documents(ctx context.Context, p enrichParams) ([]events.DocumentChunk, error) {
	if len(p.collections) == 0 && !p.defaultDocs {
		return []events.DocumentChunk{}, nil
	}
	var qv []float32
	if s.hybrid != nil {
		qv = s.queryVector(ctx, p) // the one the context items used, if they did
	}
	hits, err := s.hybrid.searchChunks(ctx, s.docs, store.ChunkQuery{
		Reader:      store.Owner{User: p.userID},
		Collections: p.collections,
		Keywords:    p.keywords,
		Defaults:    p.defaultDocs,
	}, qv, p.docsThreshold, p.docsMaxResults)
	if nc := (*store.NoCollectionError)(nil); errors.As(err, &nc) {
		return nil, badRequest("collections: no collection %q (or not readable by this user)", nc.Name)
	}
	if err != nil {
		return nil, err
	}
	out := make([]events.DocumentChunk, len(hits))
	for i, h := range hits {
		hp := h.HeadingPath
		if hp == nil {
			hp = []string{}
		}
		out[i] = events.DocumentChunk{
			Collection:  h.Collection,
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
