package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EmbeddingGenerations returns the current embedding generation
// (migrations/021) of each of users that has one. A user missing from the
// map has generation 0: no vectors, never had any or forgotten since.
// For a process's vector cache to let go of what it no longer needs
// (enricher's sweep): the requests themselves check the generation in the
// statement that reads their candidates.
func (s *Store) EmbeddingGenerations(ctx context.Context, users []string) (map[string]int64, error) {
	out := make(map[string]int64, len(users))
	if len(users) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT user_id, generation FROM embedding_generations WHERE user_id = ANY($1)`, users)
	if err != nil {
		return nil, fmt.Errorf("embedding generations: %w", err)
	}
	var (
		u string
		g int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&u, &g}, func() error { out[u] = g; return nil }); err != nil {
		return nil, fmt.Errorf("embedding generations: %w", err)
	}
	return out, nil
}

// ChunkEmbeddingGenerations returns the current embedding generation
// (migrations/028) of each of the collections ids that has one. A
// collection missing from the map has no vectors, or no longer exists
// (its row goes with it). For the same use as EmbeddingGenerations.
func (s *Store) ChunkEmbeddingGenerations(ctx context.Context, ids []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, chunkGenerationsSQL, ids)
	if err != nil {
		return nil, fmt.Errorf("chunk embedding generations: %w", err)
	}
	var id, g int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &g}, func() error { out[id] = g; return nil }); err != nil {
		return nil, fmt.Errorf("chunk embedding generations: %w", err)
	}
	return out, nil
}
