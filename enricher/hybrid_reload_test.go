package enricher

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/store"
)

// vectorReaderFunc is a VectorReader from a function.
type vectorReaderFunc func(ctx context.Context, userID, model string) (store.UserVectors, error)

func (f vectorReaderFunc) UserVectors(ctx context.Context, userID, model string) (store.UserVectors, error) {
	return f(ctx, userID, model)
}

// lexicalRead answers every read with one fact and one candidate at
// generation 7, counting the reads.
func lexicalRead(n *atomic.Int64) readFunc {
	return func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error) {
		n.Add(1)
		return []store.Fact{{UserID: q.UserID, Key: "city", Value: "Lisbon"}},
			store.Candidates{Generation: 7, Matches: []store.Candidate{{Item: store.ContextItem{ID: 1, UserID: q.UserID, Question: "q"}}}}, nil
	}
}

func testHybrid(vr VectorReader, cacheBytes int64) *hybrid {
	return &hybrid{model: "m", vectors: vr, logger: slog.New(slog.DiscardHandler), cache: newVectorCache(cacheBytes)}
}

// TestReloadTimeoutAnswersLexically: a reload of the user's vectors that
// does not come back in time leaves the first read's answer, ranked
// lexically, with time to spare, rather than an error (a degraded reply).
func TestReloadTimeoutAnswersLexically(t *testing.T) {
	var reads atomic.Int64
	h := testHybrid(vectorReaderFunc(func(ctx context.Context, _, _ string) (store.UserVectors, error) {
		<-ctx.Done()
		return store.UserVectors{}, ctx.Err()
	}), 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	facts, cands, vec, err := h.recall(ctx, store.SearchQuery{UserID: "alice"}, []float32{1, 0}, 5, lexicalRead(&reads))
	if err != nil || len(facts) != 1 || len(cands.Matches) != 1 || vec != nil {
		t.Fatalf("recall = %d facts, %d matches, vec %v, err %v; want the lexical answer and no error", len(facts), len(cands.Matches), vec, err)
	}
	if ctx.Err() != nil {
		t.Errorf("the reload used the whole budget (%v), want half of it", ctx.Err())
	}
}

// TestUncacheableUserIsNotReadEveryTime: a user whose vectors are over the
// whole cache is read once per generation, not on every request.
func TestUncacheableUserIsNotReadEveryTime(t *testing.T) {
	var reads, loads atomic.Int64
	vecs := store.UserVectors{Generation: 7}
	for i := range 50 {
		v := make([]float32, 8)
		v[i%8] = 1
		vecs.Vectors = append(vecs.Vectors, store.UserVector{ContextID: int64(i + 1), Dims: 8, Vector: embedding.Encode(v)})
	}
	h := testHybrid(vectorReaderFunc(func(ctx context.Context, _, _ string) (store.UserVectors, error) {
		loads.Add(1)
		return vecs, nil
	}), 64)
	qv := []float32{1, 0, 0, 0, 0, 0, 0, 0}
	for range 5 {
		if _, _, _, err := h.recall(context.Background(), store.SearchQuery{UserID: "alice"}, qv, 5, lexicalRead(&reads)); err != nil {
			t.Fatal(err)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("the user's vectors were read %d times at one generation, want once", n)
	}
}
