package store

import "context"

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
