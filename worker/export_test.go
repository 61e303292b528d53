package worker

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// IngestBatch records msgs as one ingest batch, as the ingest loop does, so
// that a test can choose what shares a batch.
func IngestBatch(ctx context.Context, w *Worker, msgs []jetstream.Msg) error {
	_, err := w.ingest(ctx, msgs)
	return err
}

// ExtractJobs is the shape of extraction jobs the worker passes to the store.
var ExtractJobs = extractJobs

// JobAttempts is jobAttempts, for its table test.
var JobAttempts = jobAttempts

// WindowChunks is windowChunks, for its table test.
var WindowChunks = windowChunks

// PruneLock is the lock a prune holds.
const PruneLock = pruneLock

// RecordForget is recordForget: a test leaves in NATS what a forget made on
// another copy of the database (before a restore) left there.
var RecordForget = recordForget

// ForgetKey is forgetKey: a user token's key in the forgets bucket.
var ForgetKey = forgetKey

// CrashedReason begins the error of a turn failed for crashing the model
// server.
const CrashedReason = crashedReason
