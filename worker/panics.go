package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/store"
)

// lastAttemptHandler ends an extraction job whose last attempt panicked.
// Errors are decided by outcome (retry.go) inside the job; a panic never
// reaches it there, and River would retry a panicking job up to the
// MaxAttempts in its row (25 for jobs that run the worker's attempts, see
// jobAttempts). So the panic is put to outcome here: on the job's real
// last attempt this cancels the job and marks its turns failed, as for an
// error, so that neither the job nor the reconciler keeps re-running it;
// before it, River retries the job. Either way the job's claims end here,
// as a failed run's end in the job (its deferred release, which a panic
// skips): see HandlePanic.
type lastAttemptHandler struct{ w *Worker }

var _ river.ErrorHandler = lastAttemptHandler{}

// HandleError leaves errors to River: outcome already chose the result.
func (lastAttemptHandler) HandleError(context.Context, *rivertype.JobRow, error) *river.ErrorHandlerResult {
	return nil
}

// panicked is a run's panic as outcome sees it: an error of no kind of
// its own (the value is formatted, not wrapped), so an attempt.
type panicked struct{ val any }

func (p panicked) Error() string { return fmt.Sprintf("extraction panicked: %v", p.val) }

// HandlePanic cancels an extraction job on its last attempt, and ends the
// claims the job holds (ClaimedTurns: a burst's turns, which its
// arguments do not name). Before its last attempt they are released as a
// failed run releases them (ReleaseClaims: the job's retry takes them
// back, a new turn's burst meanwhile takes them along); at its last, its
// own turns fail and each other turn it claimed gets a job of its own at
// once (requeue). Before, the claims lasted their TTL (the job timeout,
// 10 minutes by default): the burst's other turns, whose own jobs had
// ended on finding them claimed, waited that long and a reconcile more
// after a last attempt, and a new turn's burst, or a retry's job, left
// them to a job that no longer ran (TestPanickingBurstLeavesNoTurnClaimed).
func (h lastAttemptHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, _ string) *river.ErrorHandlerResult {
	if job.Kind != ExtractJobKind {
		return nil
	}
	err := panicked{panicVal}
	var args ExtractArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
		h.w.logger.Error("extraction job that panicked has unreadable arguments", "job_id", job.ID, "error", err)
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
	defer cancel()
	if !outcome(err, job, false, h.w.budget()).final {
		h.w.endPanickedClaims(mctx, job, args.UserID, false)
		return nil // River retries it
	}
	reason := err.Error()
	if len(args.EventIDs) > 0 {
		if _, err := h.w.cfg.Store.MarkJobFailed(mctx, job.ID, args.UserID, args.EventIDs, reason, true); err != nil {
			h.w.logger.Error("cannot record extraction failure", "job_id", job.ID, "error", err)
		}
	}
	h.w.endPanickedClaims(mctx, job, args.UserID, true)
	h.w.logger.Error("extraction failed", "job_id", job.ID, "attempt", job.Attempt, "final", true, "error", reason)
	return &river.ErrorHandlerResult{SetCancelled: true}
}

// endPanickedClaims ends the claims job holds on userID's turns, for a
// job that ended without its deferred releases (a panic): released for
// its next run, or, when it runs no more (last), handed over to a job
// each. A job of no user (enqueued before migration 012) claims none.
func (w *Worker) endPanickedClaims(ctx context.Context, job *rivertype.JobRow, userID string, last bool) {
	if userID == "" {
		return
	}
	ids, err := w.cfg.Store.ClaimedTurns(ctx, job.ID, userID)
	if err == nil && len(ids) > 0 {
		if !last {
			err = w.cfg.Store.ReleaseClaims(ctx, job.ID, userID, ids)
		} else {
			turns := make([]store.Turn, len(ids))
			for i, id := range ids {
				turns[i] = store.Turn{UserID: userID, EventID: id}
			}
			// A job each: the panic may be one turn's, and a job of
			// several that panicked on it at its last attempt would fail
			// the others with it (TestPanickingBurstGivesEachOtherTurnAJob).
			w.requeue(ctx, job, turns, true) // logs its own failure
		}
	}
	if err != nil {
		w.logger.Warn("cannot release the claims of an extraction job that panicked; they expire after the job timeout", "job_id", job.ID, "error", err)
	}
}
