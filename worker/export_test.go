package worker

import (
	"context"
	"time"

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

// ModelAnswered is modelAnswered: the model server answered an extraction
// of w's process, which wakes the jobs waiting for it.
func ModelAnswered(w *Worker) { w.modelAnswered() }

// WakeLingering runs, at once, one of the wakes that follow the model
// server's answer for wakeLinger (wakeWaiters on wakeSoon's timer): its
// answer and a job's snooze for it just now, no wake within wakeEvery.
func WakeLingering(ctx context.Context, w *Worker) {
	now := time.Now().UnixNano()
	w.modelWaits.since.Store(now)
	w.modelWaits.answered.Store(now)
	w.wakeWaiters(ctx, &w.modelWaits)
}

// WakeEmbedLingering is WakeLingering for the embed jobs waiting for the
// embeddings server.
func WakeEmbedLingering(ctx context.Context, w *Worker) {
	now := time.Now().UnixNano()
	w.embedWaits.since.Store(now)
	w.embedWaits.answered.Store(now)
	w.wakeWaiters(ctx, &w.embedWaits)
}

// ForgetHold is forgetHold: the name a forget of a user's token holds while
// it runs.
var ForgetHold = forgetHold

// RepeatedReplyReason begins the error of a turn failed because the model
// repeated its invalid replies to the turn's request.
const RepeatedReplyReason = repeatedReplyReason

// Reconcile runs one reconcile of w (what the periodic reconcile job
// runs) at once and returns how many pending turns it gave a job.
func Reconcile(ctx context.Context, w *Worker) (int, error) {
	rep, err := w.reconcile(ctx)
	return rep.Requeued, err
}
