package worker

import (
	"context"
	"fmt"
	"math"

	"github.com/riverqueue/river"

	"github.com/memoryd/memoryd/store"
)

// PruneArgs is the periodic River job that keeps memory under its size
// limits. River runs periodic jobs on the elected leader only, so one process
// prunes however many run.
type PruneArgs struct{}

// Kind is River's job kind.
func (PruneArgs) Kind() string { return "memoryd_prune" }

// PruneReport is what one prune run found and removed; it is logged and kept
// as the job's output.
type PruneReport struct {
	Before         store.SizeReport `json:"before"`
	RemovedForSize int64            `json:"removed_for_size"`
	RemovedForCap  int64            `json:"removed_for_cap"`
	After          store.SizeReport `json:"after"`
}

// pruneBatch bounds one DELETE, so that pruning holds row locks briefly and
// never blocks enrich (which only reads).
const pruneBatch = 1000

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	w *Worker
}

func (p *pruneWorker) Work(ctx context.Context, job *river.Job[PruneArgs]) error {
	rep, err := Prune(ctx, p.w.cfg.Store, p.w.cfg.MaxDBSize, p.w.cfg.MaxContextPerUser)
	if err != nil {
		return err
	}
	p.w.cfg.Observer.Pruned(rep.RemovedForSize + rep.RemovedForCap)
	if rep.RemovedForSize+rep.RemovedForCap > 0 {
		p.w.logger.Info("pruned context", "removed_for_size", rep.RemovedForSize, "removed_for_cap", rep.RemovedForCap,
			"live_bytes_before", rep.Before.LiveBytes, "live_bytes_after", rep.After.LiveBytes, "max_db_size", p.w.cfg.MaxDBSize)
	}
	return river.RecordOutput(ctx, rep)
}

// Prune applies the limits once: first the per-user cap on context items
// (when perUser > 0), then the size limit (when maxBytes > 0), deleting the
// oldest context items over all users in batches. Facts are small and durable
// and are never pruned.
//
// Size is measured from Postgres (pg_total_relation_size: heap, indexes and
// TOAST of turns, facts, fact_history and context). Deleted rows do not shrink
// the files, so the context table counts at its real size scaled by rows over
// its high-water row count (see store.SizeReport); after deleting, a plain
// VACUUM makes the space reusable without blocking reads or writes.
func Prune(ctx context.Context, s *store.Store, maxBytes int64, perUser int) (PruneReport, error) {
	var rep PruneReport
	var err error
	if rep.Before, err = s.MeasureSize(ctx); err != nil {
		return rep, err
	}
	if perUser > 0 {
		for {
			n, err := s.DeleteContextOverCap(ctx, perUser, pruneBatch)
			if err != nil {
				return rep, err
			}
			rep.RemovedForCap += n
			if n < pruneBatch {
				break
			}
		}
	}
	if maxBytes > 0 {
		// Measuring again after each round corrects for what VACUUM and
		// index pages do to the estimate; a few rounds always suffice.
		for round := 0; round < 5; round++ {
			size, err := s.MeasureSize(ctx)
			if err != nil {
				return rep, err
			}
			excess := size.LiveBytes - maxBytes
			if excess <= 0 || size.BytesPerContextRow() <= 0 {
				break
			}
			want := int64(math.Ceil(float64(excess) / size.BytesPerContextRow()))
			var removed int64
			for removed < want {
				n, err := s.DeleteOldestContext(ctx, int(min(want-removed, pruneBatch)))
				if err != nil {
					return rep, err
				}
				if n == 0 {
					break // nothing left that is not locked
				}
				removed += n
			}
			rep.RemovedForSize += removed
			if removed == 0 {
				break
			}
			if err := s.VacuumContext(ctx); err != nil {
				return rep, err
			}
		}
	}
	if rep.RemovedForCap > 0 {
		if err := s.VacuumContext(ctx); err != nil {
			return rep, err
		}
	}
	if err := s.RecordPrune(ctx, rep.RemovedForCap+rep.RemovedForSize); err != nil {
		return rep, err
	}
	if rep.After, err = s.MeasureSize(ctx); err != nil {
		return rep, fmt.Errorf("prune: %w", err)
	}
	return rep, nil
}
