package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// lastAttemptHandler ends an extraction job whose last attempt panicked.
// Errors are decided by outcome (retry.go) inside the job; a panic never
// reaches it there, and River would retry a panicking job up to the
// MaxAttempts in its row (25 for jobs that run the worker's attempts, see
// jobAttempts). So the panic is put to outcome here: on the job's real
// last attempt this cancels the job and marks its turns failed, as for an
// error, so that neither the job nor the reconciler keeps re-running it;
// before it, River retries the job.
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

// HandlePanic cancels an extraction job on its last attempt.
func (h lastAttemptHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, panicVal any, _ string) *river.ErrorHandlerResult {
	if job.Kind != ExtractJobKind {
		return nil
	}
	err := panicked{panicVal}
	if !outcome(err, job, false, h.w.budget()).final {
		return nil // River retries it
	}
	reason := err.Error()
	var args ExtractArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err == nil && len(args.EventIDs) > 0 {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), afterCancelTimeout)
		defer cancel()
		if err := h.w.cfg.Store.MarkJobFailed(mctx, job.ID, args.UserID, args.EventIDs, reason, true); err != nil {
			h.w.logger.Error("cannot record extraction failure", "job_id", job.ID, "error", err)
		}
	}
	h.w.logger.Error("extraction failed", "job_id", job.ID, "attempt", job.Attempt, "final", true, "error", reason)
	return &river.ErrorHandlerResult{SetCancelled: true}
}
