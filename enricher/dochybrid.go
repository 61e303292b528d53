package enricher

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

// Hybrid document search (issue 19 with issue 17). With Config.Embedder
// set, memory.docs.search and enrich's documents add a vector side to the
// lexical chunk search, as context items have (hybrid.go):
//
//  1. The query vector is the request's one: enrich embeds its message at
//     most once (queryVector) for its context items and its documents;
//     memory.docs.search embeds its query once. A request without a
//     vector (embedding off, down, slow) is answered lexically.
//  2. In the search's snapshot (store.SearchChunksHybrid), the collections
//     the reader may search are found exactly as for a lexical search, and
//     their embedding generations read (migrations/028). Each collection's
//     vectors are cached per process (the context items' vectorCache and
//     budget, keyed by collection: vectors belong to the collection, so a
//     shared collection is cached once for all its readers) and used only
//     when the cached generation is the snapshot's; otherwise they are read
//     again in the snapshot. So the vector side is exact, and it only ever
//     sees the searched collections: a chunk the reader may not read cannot
//     come back through it.
//  3. The searched collections' vectors are scored exactly, and calibrated
//     together into a vector score in 0..1 (vectorScore, against the
//     similarity distribution over all their chunks).
//  4. fuseChunks combines each chunk's lexical score (RankChunks) and
//     vector score as fuse does: 1 − (1 − l)(1 − v). A chunk found by one
//     side only scores what that side says, so docs_threshold means the
//     same in both modes. Documents have no time: no recency factor.
//
// Any failure of the hybrid search (vectors unreadable in half the time
// left, an index that cannot be built) answers the request lexically with
// the rest of its time; enrich never fails because of the vector side.

// HybridChunkSearcher is the hybrid chunk search (*store.Store has it).
// Without it, documents are searched lexically.
type HybridChunkSearcher interface {
	SearchChunksHybrid(ctx context.Context, q store.ChunkQuery, pick store.ChunkPicker, rank store.HybridChunkRanker) ([]store.ChunkHit, error)
}

// queryVector is an enrich request's query vector, embedded at most once
// for its context items and its documents.
type queryVector struct {
	done bool
	v    []float32
}

// queryVector returns p's query vector (nil: lexical), embedding the
// message on first use. Not safe for concurrent use: an enrich reads
// its context and documents one after the other.
func (s *Service) queryVector(ctx context.Context, p enrichParams) []float32 {
	q := p.qvec
	if q == nil {
		q = &queryVector{}
	}
	if !q.done {
		text := queryText(p)
		if p.timed && strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }) < 0 {
			// Nothing but a time ("Yesterday?"): nothing to embed.
			q.done = true
			return nil
		}
		start := time.Now()
		q.v, q.done = s.hybrid.embedEnrich(ctx, p.userID, text), true
		if p.embedNanos != nil {
			p.embedNanos.Store(int64(time.Since(start)))
		}
	}
	return q.v
}

// queryText is the text of p's message that is embedded: all of it, but
// for the words of its time expression (ParseTime), which said when, not
// what, and are not searched for lexically either ("the dog last week"
// must not find by meaning an item of that week that says "this week").
func queryText(p enrichParams) string {
	if !p.timed {
		return p.message
	}
	before := strings.TrimRightFunc(p.message[:p.when.Start], unicode.IsSpace)
	after := strings.TrimLeftFunc(p.message[p.when.End:], unicode.IsSpace)
	if before == "" || after == "" {
		return before + after
	}
	return before + " " + after
}

// searchChunks runs a chunk search of q ranked for threshold and limit:
// hybrid with the query vector qv when it is set and the store can,
// lexically otherwise, and lexically with the time left when the hybrid
// search fails for any reason but a collection the reader may not read
// (store.ErrNoCollection, returned as is). Nil-safe: a nil h is lexical.
func (h *hybrid) searchChunks(ctx context.Context, st ChunkSearcher, q store.ChunkQuery, qv []float32, threshold float64, limit int) ([]store.ChunkHit, error) {
	hs, ok := st.(HybridChunkSearcher)
	if h == nil || qv == nil || !ok {
		return st.SearchChunks(ctx, q, ChunkRanker(threshold, limit))
	}
	sub, cancel := halfLeft(ctx)
	hits, err := hs.SearchChunksHybrid(sub, q, h.chunkPicker(qv), fuseChunks(threshold, limit))
	cancel()
	if err == nil || errors.Is(err, store.ErrNoCollection) || ctx.Err() != nil {
		return hits, err
	}
	h.docFallbacks.Add(1)
	if sub.Err() != nil {
		h.logger.Debug("the hybrid document search did not finish in time; answering lexically", "user_id", q.Reader.User)
	} else {
		h.logger.Warn("the hybrid document search failed; answering lexically", "user_id", q.Reader.User, "error", err)
	}
	return st.SearchChunks(ctx, q, ChunkRanker(threshold, limit))
}

// chunkPicker is the vector side of a hybrid chunk search for qv: the
// searched collections' cached (or, when stale, re-read) vectors searched
// exactly, calibrated together, at most vectorCandidates picks whose
// vector score is above 0, best first.
func (h *hybrid) chunkPicker(qv []float32) store.ChunkPicker {
	return func(ctx context.Context, gens map[int64]int64, load store.ChunkVectorLoader) ([]store.ChunkPick, error) {
		ids := make([]int64, 0, len(gens))
		for id, g := range gens {
			if g != 0 {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		type part struct {
			e *userVectors
			r embedding.Result
		}
		var parts []part
		p := embedding.SearchParams{K: vectorCandidates, Candidates: prefilterCandidates, Sample: statsSample}
		for _, id := range ids {
			e, err := h.collectionVectors(ctx, id, gens[id], len(qv), load)
			if err != nil {
				return nil, err
			}
			if e == nil || e.index == nil {
				continue
			}
			parts = append(parts, part{e, e.index.Search(qv, nil, p)})
		}
		// The statistics of the union of the collections' chunks, from
		// each collection's: the pooled mean and variance.
		var pop, n int
		var sum float64
		for _, pt := range parts {
			pop += pt.r.Population
			n += pt.r.N
			sum += float64(pt.r.Population) * pt.r.Mean
		}
		if pop == 0 {
			return nil, nil
		}
		mean := sum / float64(pop)
		var ss float64
		for _, pt := range parts {
			d := pt.r.Mean - mean
			ss += float64(pt.r.Population) * (pt.r.Std*pt.r.Std + d*d)
		}
		std := math.Sqrt(ss / float64(pop))
		var picks []store.ChunkPick
		for _, pt := range parts {
			for _, hit := range pt.r.Hits {
				v := vectorScore(float64(hit.Cos), mean, std, pop, n)
				if v <= 0 {
					break // hits are best first
				}
				picks = append(picks, store.ChunkPick{CollectionID: pt.e.key.collection, DocID: pt.e.docs[hit.I],
					ChunkIndex: int(pt.e.chunks[hit.I]), Score: v})
			}
		}
		slices.SortStableFunc(picks, func(a, b store.ChunkPick) int { return cmp.Compare(b.Score, a.Score) })
		return picks[:min(len(picks), vectorCandidates)], nil
	}
}

// collectionVectors returns the cache's entry of the collection at
// generation, reading and caching it when the cache has none or an older
// one; nil when the collection's vectors cannot be indexed, or are over the
// whole cache at this generation (its chunks are then ranked lexically
// until they change, rather than read on every request).
func (h *hybrid) collectionVectors(ctx context.Context, id, generation int64, dims int, load store.ChunkVectorLoader) (*userVectors, error) {
	k := cacheKey{model: h.model, collection: id}
	if e := h.cache.getKey(k, dims); e != nil && e.generation == generation {
		return e, nil
	}
	if h.cache.skippedKey(k, generation) {
		return nil, nil
	}
	h.reloads.Add(1)
	cv, err := load(ctx, id, h.model)
	if err != nil {
		return nil, err
	}
	e, err := newCollectionVectors(k, dims, cv)
	if err != nil {
		h.cache.markSkipKey(k, cv.Generation)
		h.logger.Warn("cannot index a collection's vectors; its chunks are ranked lexically", "collection_id", id, "error", err)
		return nil, nil
	}
	if !h.cache.put(e) {
		h.cache.markSkipKey(k, cv.Generation)
	}
	return e, nil
}

// newCollectionVectors builds the cache entry of a collection's vectors of
// dims dimensions (others, of a model before the one behind its name
// changed, are left out).
func newCollectionVectors(k cacheKey, dims int, cv store.CollectionVectors) (*userVectors, error) {
	e := &userVectors{key: k, generation: cv.Generation, dims: dims}
	// Sized once, as newUserVectors's: what the entry counts is what it
	// holds (grown by append, the slices held up to twice their length).
	n := len(cv.Vectors)
	stored := make([][]byte, 0, n)
	e.docs, e.chunks = make([]string, 0, n), make([]int32, 0, n)
	docBytes := 0
	for _, v := range cv.Vectors {
		if v.Dims != dims {
			continue
		}
		stored = append(stored, v.Vector)
		if n := len(e.docs); n == 0 || e.docs[n-1] != v.DocID {
			docBytes += len(v.DocID)
		}
		e.docs = append(e.docs, v.DocID)
		e.chunks = append(e.chunks, int32(v.ChunkIndex))
	}
	e.bytes = entryOverhead + int64(cap(e.docs))*(16+4) + int64(docBytes)
	if len(stored) > 0 {
		x, err := embedding.NewIndex(dims, stored)
		if err != nil {
			return nil, err
		}
		e.index = x
		e.bytes += int64(x.Bytes())
	}
	return e, nil
}

// fuseChunks is the store.HybridChunkRanker that ranks chunks by lexical
// and vector evidence together: a chunk's score is 1 − (1 − l)(1 − v), l
// its lexical score (RankChunks) and v its vector score (0 when the vector
// side did not pick it). Chunks scoring at least threshold (and above 0)
// are returned best first (ties: lexical order, then the vector side's), at
// most limit, each with its Score.
//
// Only the lexical top limit and the picked chunks can make the fused top
// limit (a chunk the vector side did not pick scores its lexical score,
// under the limit lexical ones above it), so only those are fused and
// sorted: the lexical side may have thousands of candidates.
func fuseChunks(threshold float64, limit int) store.HybridChunkRanker {
	return func(c store.HybridChunkCandidates) []store.ChunkHit {
		if len(c.Vector) == 0 {
			return RankChunks(c.ChunkCandidates, threshold, limit)
		}
		type key struct {
			col, doc string
			i        int
		}
		picked := make(map[key]int, len(c.Vector))
		indexes := make(map[int]bool, len(c.Vector)) // a cheap test before the map's
		for j, vc := range c.Vector {
			picked[key{vc.Hit.Collection, vc.Hit.DocumentID, vc.Hit.ChunkIndex}] = j
			indexes[vc.Hit.ChunkIndex] = true
		}
		lex := RankChunks(c.ChunkCandidates, 0, len(c.Matches)) // best first
		fused := make([]bool, len(c.Vector))
		var out []store.ChunkHit
		for r, h := range lex {
			j, ok := -1, false
			if indexes[h.ChunkIndex] {
				j, ok = picked[key{h.Collection, h.DocumentID, h.ChunkIndex}]
			}
			if !ok && r >= limit {
				continue
			}
			if ok {
				h.Score = 1 - (1-h.Score)*(1-c.Vector[j].Score)
				fused[j] = true
			}
			out = append(out, h)
		}
		for j, vc := range c.Vector {
			if !fused[j] {
				h := vc.Hit
				h.Score = vc.Score
				out = append(out, h)
			}
		}
		out = slices.DeleteFunc(out, func(h store.ChunkHit) bool { return !(h.Score > 0 && h.Score >= threshold) })
		slices.SortStableFunc(out, func(a, b store.ChunkHit) int { return cmp.Compare(b.Score, a.Score) })
		if out == nil {
			out = []store.ChunkHit{}
		}
		return out[:min(len(out), max(limit, 0))]
	}
}
