package store

import (
	"context"
	"errors"
)

// WithPruneChosenHook returns a ctx under which DeleteOldestContext and
// DeleteContextOverCap call hook after choosing the items to delete and
// before deleting them.
func WithPruneChosenHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, pruneChosenKey{}, hook)
}

// WithChunkVectors returns a ctx under which chunk searches read their
// candidates from the chunks' vectors, as before migration 027 (and as
// phrase queries still do).
func WithChunkVectors(ctx context.Context) context.Context {
	return context.WithValue(ctx, chunkVectorsKey{}, true)
}

// HoldSetting is a setting of the connection s's holds are taken on (one
// must be held).
func HoldSetting(ctx context.Context, s *Store, name string) (string, error) {
	s.holds.mu.Lock()
	defer s.holds.mu.Unlock()
	if s.holds.conn == nil {
		return "", errors.New("nothing held")
	}
	var v string
	err := s.holds.conn.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}
