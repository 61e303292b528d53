package worker

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/memoryd/memoryd/store"
)

// ReconcileArgs is the periodic River job that makes sure every turn ends
// processed or failed. River inserts periodic jobs on the elected leader
// only, and the job is unique while waiting or running (InsertOpts), so one
// process reconciles at a time however many run.
type ReconcileArgs struct{}

// Kind is River's job kind.
func (ReconcileArgs) Kind() string { return "memoryd_reconcile" }

// InsertOpts puts the job on the maintenance queue, once at a time: a run
// that waits behind a long prune is not joined by more.
func (ReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// ReconcileReport is what one reconcile run did; it is logged and kept as the
// job's output.
type ReconcileReport struct {
	// Requeued counts pending turns that no live job named, given a new job.
	Requeued int `json:"requeued"`
	// Failed counts pending turns whose job River discarded after its last
	// attempt, marked failed.
	Failed int `json:"failed"`
	// ClaimsCleared counts the claims left on processed turns by an
	// earlier release that this run ended (store.ClearProcessedClaims).
	ClaimsCleared int64 `json:"claims_cleared,omitempty"`
}

// reconcileBatch bounds one reconcile transaction; reconcileBatches bounds a
// run (the rest waits for the next).
const (
	reconcileBatch   = 500
	reconcileBatches = 20
)

// claimsBatch bounds one statement clearing the claims left on processed
// turns, claimsBatches a reconcile run's (the rest waits for the next run,
// a minute later by default: 100,000 turns a run).
const (
	claimsBatch   = 5000
	claimsBatches = 20
)

// clearProcessedClaims ends the claims an earlier release left on
// processed turns (store.ClearProcessedClaims), in batches, until none is
// left or the run's share is done; it returns how many it ended. Best
// effort: an error is logged, and the next run goes on. It runs on every
// reconcile, not once: during a rolling upgrade the processes of the
// earlier release leave more, and once none is left a batch finds none
// through the claims' index, which holds only the claims of jobs running.
func (w *Worker) clearProcessedClaims(ctx context.Context) int64 {
	var cleared int64
	for range claimsBatches {
		n, err := w.cfg.Store.ClearProcessedClaims(ctx, claimsBatch)
		if err != nil {
			if ctx.Err() == nil { // not a stop cutting the run
				w.logger.Warn("cannot clear the claims left on processed turns; the next reconcile retries", "error", err)
			}
			break
		}
		cleared += n
		if n < claimsBatch {
			break
		}
	}
	if cleared > 0 {
		w.logger.Info("cleared the claims an earlier release left on processed turns", "turns", cleared)
	}
	return cleared
}

type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	w *Worker
}

func (r *reconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	rep, err := r.w.reconcile(ctx)
	if err != nil {
		return err
	}
	rep.ClaimsCleared = r.w.clearProcessedClaims(ctx)
	r.w.dropOldSpend(ctx)
	r.w.finishStaleForgets(ctx)
	// Copies of exports abandoned part-way (store.SpoolTTL): they hold a
	// user's memory, so they do not wait for the next export to go.
	if _, err := r.w.cfg.Store.DeleteExpiredSpools(ctx); err != nil {
		r.w.logger.Warn("cannot delete expired export copies", "error", err)
	}
	// Every minute or so, between the prune's measures, which a VACUUM of
	// a reset's dead rows could otherwise fall between (see
	// store.SampleContextHighWater). Best effort: the next sample retries.
	if err := r.w.cfg.Store.SampleContextHighWater(ctx); err != nil {
		r.w.logger.Warn("sample context size", "error", err)
	}
	if rep.Requeued > 0 || rep.Failed > 0 {
		r.w.logger.Warn("reconciled turns left without a job", "requeued", rep.Requeued, "failed", rep.Failed)
	}
	return river.RecordOutput(ctx, rep)
}

// reconcile finds pending turns that no live extraction job names (see
// store.OrphanedTurns) and settles each: a turn whose job River discarded
// after its last attempt (its rescuer does that to a job whose process died
// during it, and to a job that panicked every time) is marked failed with
// the reason, where `memoryd failed` lists it and retry-failed re-runs it;
// any other (its job was deleted, or ended without it) gets a new job.
func (w *Worker) reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	for range reconcileBatches {
		var (
			orphans   []store.OrphanedTurn
			discarded map[discardedJob][]string
			attempts  map[int64]int
		)
		err := w.cfg.Store.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
			var err error
			if orphans, err = q.OrphanedTurns(ctx, extractJobs, reconcileBatch); err != nil || len(orphans) == 0 {
				return err
			}
			var requeue []store.Turn
			discarded, attempts = map[discardedJob][]string{}, map[int64]int{}
			for _, o := range orphans {
				if o.DiscardedJob != 0 {
					d := discardedJob{o.DiscardedJob, o.UserID}
					discarded[d] = append(discarded[d], o.EventID)
					attempts[o.DiscardedJob] = o.DiscardedAttempts
					continue
				}
				requeue = append(requeue, store.Turn{UserID: o.UserID, EventID: o.EventID})
			}
			for d, ids := range discarded {
				reason := fmt.Sprintf("extraction job %d discarded after %d attempts", d.job, attempts[d.job])
				if err := q.MarkFailed(ctx, d.user, ids, reason, true); err != nil {
					return err
				}
			}
			return w.enq.enqueueTurns(ctx, tx, requeue, 1, sourceReconcile, nil)
		})
		if err != nil {
			return rep, fmt.Errorf("reconcile: %w", err)
		}
		for d, ids := range discarded {
			rep.Failed += len(ids)
			w.logger.Error("extraction job discarded after its last attempt; its turns marked failed",
				"job_id", d.job, "attempts", attempts[d.job], "turns", len(ids))
			w.cfg.Observer.Extracted(0, len(ids), outcomeDiscarded)
		}
		if n := len(orphans) - countIDs(discarded); n > 0 {
			rep.Requeued += n
			w.cfg.Observer.Extracted(0, n, outcomeRequeued)
		}
		if len(orphans) < reconcileBatch {
			break
		}
	}
	return rep, nil
}

// discardedJob groups a discarded job's orphaned turns by user (event ids are
// unique per user only; a job enqueued before migration 012 may hold several
// users' turns).
type discardedJob struct {
	job  int64
	user string
}

func countIDs(m map[discardedJob][]string) int {
	n := 0
	for _, ids := range m {
		n += len(ids)
	}
	return n
}
