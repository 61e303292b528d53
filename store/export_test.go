package store

import "context"

// WithPruneChosenHook returns a ctx under which DeleteOldestContext and
// DeleteContextOverCap call hook after choosing the items to delete and
// before deleting them.
func WithPruneChosenHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, pruneChosenKey{}, hook)
}
