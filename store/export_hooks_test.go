package store

import "context"

// WithImportHook returns a ctx under which Import calls hook half-way: in
// its transaction, after writing the facts and before the rest.
func WithImportHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, importHookKey{}, hook)
}
