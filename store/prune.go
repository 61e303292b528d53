package store

import (
	"context"
	"fmt"
	"math"
)

// SizeReport is what the pruner measures.
type SizeReport struct {
	// RealBytes is the on-disk size of memoryd's tables (turns, facts,
	// fact_history, context) including indexes and TOAST.
	RealBytes int64 `json:"real_bytes"`
	// ContextBytes is the context table's real size, indexes and TOAST
	// included.
	ContextBytes int64 `json:"context_bytes"`
	// ContextRows counts context items; HighWater is the most there were.
	ContextRows int64 `json:"context_rows"`
	HighWater   int64 `json:"high_water"`
	// LiveBytes estimates the size in use: the other tables at their real
	// size, plus the context table scaled by ContextRows/HighWater (space of
	// deleted rows is reused after VACUUM, not returned to the OS).
	LiveBytes int64 `json:"live_bytes"`
}

// BytesPerContextRow is the context table's real size per row at its high
// water mark: what deleting one row frees for reuse.
func (r SizeReport) BytesPerContextRow() float64 {
	if r.HighWater == 0 {
		return 0
	}
	return float64(r.ContextBytes) / float64(r.HighWater)
}

// MeasureSize measures memoryd's tables and raises the high water mark.
func (s *Store) MeasureSize(ctx context.Context) (SizeReport, error) {
	var r SizeReport
	err := s.db.QueryRow(ctx, `
		WITH sz AS (
			SELECT pg_total_relation_size('turns'::regclass) + pg_total_relation_size('facts'::regclass)
			     + pg_total_relation_size('fact_history'::regclass) AS other,
			       pg_total_relation_size('context'::regclass) AS ctx,
			       (SELECT count(*) FROM context) AS rows
		), hw AS (
			UPDATE prune_state SET context_high_water = greatest(context_high_water, (SELECT rows FROM sz))
			RETURNING context_high_water
		)
		SELECT other + ctx, ctx, rows, (SELECT context_high_water FROM hw) FROM sz`).
		Scan(&r.RealBytes, &r.ContextBytes, &r.ContextRows, &r.HighWater)
	if err != nil {
		return r, fmt.Errorf("measure size: %w", err)
	}
	other := r.RealBytes - r.ContextBytes
	r.LiveBytes = other + int64(math.Round(float64(r.ContextRows)*r.BytesPerContextRow()))
	return r, nil
}

// DeleteOldestContext deletes up to n of the oldest context items over all
// users, skipping rows locked by a concurrent insert that is deduplicating
// against them. It returns how many it deleted.
func (s *Store) DeleteOldestContext(ctx context.Context, n int) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM context WHERE id IN (
		SELECT id FROM context ORDER BY created_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)`, n)
	if err != nil {
		return 0, fmt.Errorf("delete oldest context: %w", err)
	}
	return tag.RowsAffected(), nil
}

// DeleteContextOverCap deletes up to n context items that are beyond the
// newest perUser items of their user, oldest first.
func (s *Store) DeleteContextOverCap(ctx context.Context, perUser, n int) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM context WHERE id IN (
		SELECT id FROM context WHERE id IN (
			SELECT id FROM (
				SELECT id, row_number() OVER (PARTITION BY user_id ORDER BY created_at DESC, id DESC) AS rn
				FROM context
				WHERE user_id IN (SELECT user_id FROM context GROUP BY user_id HAVING count(*) > $1)
			) ranked WHERE rn > $1
			LIMIT $2)
		FOR UPDATE SKIP LOCKED)`, perUser, n)
	if err != nil {
		return 0, fmt.Errorf("delete context over cap: %w", err)
	}
	return tag.RowsAffected(), nil
}

// VacuumContext makes the space of deleted context rows reusable. Plain
// VACUUM takes no lock that blocks reads or writes, so enrich goes on.
func (s *Store) VacuumContext(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) context`); err != nil {
		return fmt.Errorf("vacuum context: %w", err)
	}
	return nil
}

// RecordPrune notes a prune run.
func (s *Store) RecordPrune(ctx context.Context, removed int64) error {
	if _, err := s.db.Exec(ctx, `UPDATE prune_state SET last_run_at = now(), last_removed = $1`, removed); err != nil {
		return fmt.Errorf("record prune: %w", err)
	}
	return nil
}
