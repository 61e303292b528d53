package enricher

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// GenerationReader reads the current embedding generations of users and of
// document collections (*store.Store does): a user or collection missing
// from a map has none (no vectors, forgotten, deleted). With it, the
// service sweeps its vector cache (vectorSweepEvery).
type GenerationReader interface {
	EmbeddingGenerations(ctx context.Context, users []string) (map[string]int64, error)
	ChunkEmbeddingGenerations(ctx context.Context, ids []int64) (map[int64]int64, error)
}

// vectorSweepEvery is how often a process lets go of the cached vectors
// whose generation has moved on. Requests never use such an entry (they
// check the generation in their own statement), but without the sweep it
// stayed in memory until evicted by others or replaced by the user's next
// request here: a user forgotten, or a collection deleted, through any
// process kept their vectors, item ids, times and scopes in the heap of
// every process that had served them, for as long as no other user needed
// the room (with the default 48 MiB and a few users, for good). A minute
// bounds that; one read of the cached keys' generations costs a primary
// key probe per key.
const vectorSweepEvery = time.Minute

// sweepTimeout bounds one sweep's reads, and sweepBatch the keys read by
// one statement: a cache of many small users holds some 200,000 (a
// many-users walk's 196,608); psql on the development machine read 200,000
// of 200,000 rows' generations in 463 ms, 5,000 in 11 ms.
const (
	sweepTimeout = 10 * time.Second
	sweepBatch   = 5000
)

// sweep drops the cache's entries and skip records whose user's or
// collection's generation is no longer theirs, or is 0, and returns how
// many. An entry put since the keys were read is kept: it holds another
// generation.
func (h *hybrid) sweep(ctx context.Context, r GenerationReader) (int, error) {
	entries, skips := h.cache.held()
	var users []string
	var colls []int64
	for _, list := range [][]cachedAt{entries, skips} {
		for _, c := range list {
			if c.key.collection != 0 {
				colls = append(colls, c.key.collection)
			} else {
				users = append(users, c.key.user)
			}
		}
	}
	if len(users)+len(colls) == 0 {
		return 0, nil
	}
	ug, cg := make(map[string]int64, len(users)), make(map[int64]int64, len(colls))
	for b := range slices.Chunk(users, sweepBatch) {
		g, err := r.EmbeddingGenerations(ctx, b)
		if err != nil {
			return 0, fmt.Errorf("sweep vector cache: %w", err)
		}
		maps.Copy(ug, g)
	}
	for b := range slices.Chunk(colls, sweepBatch) {
		g, err := r.ChunkEmbeddingGenerations(ctx, b)
		if err != nil {
			return 0, fmt.Errorf("sweep vector cache: %w", err)
		}
		maps.Copy(cg, g)
	}
	current := func(k cacheKey) int64 {
		if k.collection != 0 {
			return cg[k.collection]
		}
		return ug[k.user]
	}
	n := 0
	for i, list := range [][]cachedAt{entries, skips} {
		for _, c := range list {
			// Generation 0 is no vector: such an entry holds nothing but
			// the user's id, which goes too (a user forgotten while a
			// request was in flight is cached empty); the user's next
			// request here reads it again, one query.
			if (c.generation == 0 || current(c.key) != c.generation) && h.cache.dropAt(c.key, c.generation, i == 1) {
				n++
			}
		}
	}
	return n, nil
}

// startSweeper runs the vector cache's sweep every vectorSweepEvery until
// Stop, when the service has a vector cache and its store can read
// generations. Called by Start with s.mu held.
func (s *Service) startSweeper() {
	r, ok := s.cfg.Store.(GenerationReader)
	if s.hybrid == nil || !ok {
		return
	}
	s.work.Add(1)
	go func() {
		defer s.work.Done()
		// A sweep under way ends with the service's stop: Stop waits for
		// s.work, and a sweep has nothing to finish.
		base, stop := s.untilQuit(s.halted)
		defer stop()
		t := time.NewTicker(vectorSweepEvery)
		defer t.Stop()
		for {
			select {
			case <-base.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(base, sweepTimeout)
			n, err := s.hybrid.sweep(ctx, r)
			cancel()
			if err != nil {
				s.logger.Debug("vector cache sweep failed; the next one tries again", "error", err)
			} else if n > 0 {
				s.logger.Debug("vector cache swept", "dropped", n)
			}
		}
	}()
}
