package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Process liveness: every worker process has a row in memoryd_processes,
// keyed by its River client id, and renews it while it runs (see
// worker/recover.go for the protocol).

// RegisterProcess records a worker process as alive, or alive again.
func (s *Store) RegisterProcess(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO memoryd_processes (id) VALUES ($1)
		ON CONFLICT (id) DO UPDATE SET started_at = now(), heartbeat_at = now()`, id)
	if err != nil {
		return fmt.Errorf("register process: %w", err)
	}
	return nil
}

// Heartbeat renews a process's liveness. It returns false when the row is
// gone: another process found the heartbeat too old, declared the process
// dead and handed its running jobs on (TakeOverJobs).
func (s *Store) Heartbeat(ctx context.Context, id string) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = now() WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// EndProcess marks a process that stopped (its jobs have returned) as dead
// at once, so that the next TakeOverJobs hands on anything it left running
// and removes its row.
func (s *Store) EndProcess(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = '-infinity' WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("end process: %w", err)
	}
	return nil
}

// TakenJob is a job that was running in a dead process, as TakeOverJobs
// found it.
type TakenJob struct {
	ID          int64
	Kind        string
	Process     string
	Args        json.RawMessage
	Queue       string
	Attempt     int
	MaxAttempts int
	Metadata    json.RawMessage
	AttemptedAt time.Time
}

// TakeOverJobs declares dead every process whose heartbeat is older than
// deadAfter (by Postgres's clock, the one clock every process shares),
// deletes their rows, and ends their running jobs: each is set to cancelled,
// with an error saying why, and returned, so that the caller inserts a
// replacement in the same transaction. Call it inside InTx.
//
// This is memoryd's one write to River's job table (river_job, River v0.51
// schema). River's client cannot retry a running job (JobRetry skips it) and
// its rescuer waits RescueStuckJobsAfter; ending the row, rather than setting
// it back to available, means that a late completion from the old process
// (River's completer only updates rows still 'running') can never change
// the replacement. Deleting the process rows first locks them, so a
// concurrent Heartbeat of a process declared dead waits for this transaction
// and then learns it is dead; two processes taking over at once serialise on
// the same rows and the second finds nothing. Jobs of ids without a row
// (processes of an older memoryd) are left to River's rescuer.
func (s *Store) TakeOverJobs(ctx context.Context, deadAfter time.Duration) ([]TakenJob, error) {
	rows, err := s.db.Query(ctx, `DELETE FROM memoryd_processes WHERE heartbeat_at < now() - $1::interval RETURNING id`, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("take over jobs: %w", err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(dead) == 0 {
		if err != nil {
			err = fmt.Errorf("take over jobs: %w", err)
		}
		return nil, err
	}
	rows, err = s.db.Query(ctx, `
		UPDATE river_job SET
			state = 'cancelled',
			finalized_at = now(),
			errors = array_append(errors, jsonb_build_object(
				'at', now(), 'attempt', attempt, 'trace', '',
				'error', 'memoryd: process ' || attempted_by[array_upper(attempted_by, 1)] || ' stopped while running this job; a new job took it over'))
		WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] = ANY($1)
		RETURNING id, kind, attempted_by[array_upper(attempted_by, 1)], args, queue, attempt, max_attempts, metadata, coalesce(attempted_at, now())`,
		dead)
	if err != nil {
		return nil, fmt.Errorf("take over jobs: %w", err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TakenJob, error) {
		var j TakenJob
		err := r.Scan(&j.ID, &j.Kind, &j.Process, &j.Args, &j.Queue, &j.Attempt, &j.MaxAttempts, &j.Metadata, &j.AttemptedAt)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("take over jobs: %w", err)
	}
	// A debounced burst job holds a claim on its conversation's turns; its
	// replacement is a new job that cannot take that claim back, so the
	// claims of the jobs taken over end here (else the burst would wait for
	// the claim to expire, a job timeout later).
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	if _, err := s.db.Exec(ctx, `UPDATE turns SET claimed_until = NULL, claimed_by = NULL WHERE claimed_by = ANY($1)`, ids); err != nil {
		return nil, fmt.Errorf("take over jobs: release claims: %w", err)
	}
	return jobs, nil
}

// OrphanedTurn is a pending turn that no live extraction job names.
type OrphanedTurn struct {
	EventID string
	UserID  string
	// DiscardedJob is the newest job naming the turn that River discarded
	// because its attempts ran out (e.g. its rescuer gave up on a job whose
	// process died on its last attempt), and DiscardedAttempts the attempts
	// it ran; zero when there is none (the job was deleted, or ended without
	// processing the turn).
	DiscardedJob      int64
	DiscardedAttempts int
}

// OrphanedTurns returns up to limit pending turns, oldest first, that no
// live extraction job names (River states available, pending, retryable,
// running, scheduled) and that no debounced burst has claimed, with the
// newest discarded job naming each. A job names a turn when it lists the
// turn's event id and names the turn's user (or no user: a job enqueued
// before migration 012). It reads River's job table
// (river_job, River v0.51 schema): the live jobs through River's state index
// once per call, and the discarded jobs only for the turns found. One statement
// sees one snapshot, and ingest, replay and retry-failed insert a turn's
// job in the transaction that sets it pending, so a turn is never seen
// between the two.
func (s *Store) OrphanedTurns(ctx context.Context, limit int) ([]OrphanedTurn, error) {
	rows, err := s.db.Query(ctx, `
		WITH live AS MATERIALIZED (
			SELECT DISTINCT coalesce(j.args->>'user_id', '') AS user_id, e.event_id
			FROM river_job j, jsonb_array_elements_text(j.args->'event_ids') AS e(event_id)
			WHERE j.kind = $1 AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
		), orphan AS (
			SELECT t.event_id, t.user_id, t.received_at FROM turns t
			WHERE t.status = 'pending' AND (t.claimed_until IS NULL OR t.claimed_until < now())
			  AND NOT EXISTS (SELECT 1 FROM live WHERE live.event_id = t.event_id AND live.user_id IN (t.user_id, ''))
			ORDER BY t.received_at, t.event_id
			LIMIT $2
		), discarded AS (
			SELECT DISTINCT ON (o.user_id, o.event_id) o.user_id, o.event_id, j.id, j.attempt
			FROM river_job j, jsonb_array_elements_text(j.args->'event_ids') AS e(event_id), orphan o
			WHERE j.kind = $1 AND j.state = 'discarded'
			  AND e.event_id = o.event_id AND coalesce(j.args->>'user_id', '') IN (o.user_id, '')
			ORDER BY o.user_id, o.event_id, j.id DESC
		)
		SELECT o.event_id, o.user_id, coalesce(d.id, 0), coalesce(d.attempt, 0)
		FROM orphan o LEFT JOIN discarded d USING (user_id, event_id)
		ORDER BY o.received_at, o.event_id, o.user_id`, ExtractJobKind, limit)
	if err != nil {
		return nil, fmt.Errorf("orphaned turns: %w", err)
	}
	turns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrphanedTurn, error) {
		var t OrphanedTurn
		err := r.Scan(&t.EventID, &t.UserID, &t.DiscardedJob, &t.DiscardedAttempts)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("orphaned turns: %w", err)
	}
	return turns, nil
}
