package store

import "context"

// WithImportHook returns a ctx under which Import calls hook half-way: in
// its transaction, after writing the facts and before the rest.
func WithImportHook(ctx context.Context, hook func()) context.Context {
	return context.WithValue(ctx, importHookKey{}, hook)
}

// WithDeleteBatch returns a ctx under which DeleteDocumentsBefore deletes
// n documents a transaction.
func WithDeleteBatch(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, deleteBatchKey{}, n)
}

// WithSpoolPartBytes returns a ctx under which SpoolExport writes its copy
// in parts of n bytes.
func WithSpoolPartBytes(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, spoolPartKey{}, n)
}

// KeptChunkVectorsSQL is the statement keptChunkVectors runs, with its
// parameters: collection id, document id, the new cut's heading paths
// (joined by headingSep) and texts, the old content's hash.
var KeptChunkVectorsSQL = keptChunkVectorsSQL
