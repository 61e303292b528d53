package store

// SQL on River's job table (river_job, River v0.51 schema) that River's
// client API cannot do; everything else about jobs goes through River's
// client in the worker. Kept in this one file so that a River upgrade has one
// place to check. The store does not know memoryd's job kinds or their
// arguments: the worker passes them in (RiverJobs).
//
// Why not River's API:
//   - forget (deleteUserJobs): JobDeleteMany never deletes running jobs and
//     skips rows another transaction has locked, so it cannot promise that no
//     job row names the user once the forget commits; nor can it edit a job's
//     arguments (a legacy job of several users loses only the user's ids).
//   - takeover (TakeOverJobs): JobCancel on a running job only asks its
//     process to stop, and that process is dead; the row must be ended here.
//   - reconcile (OrphanedTurns): it joins the jobs' event ids with the turns
//     table in one snapshot; JobList can neither join nor unnest arguments.
//   - QueueDepth: River's client has no count; listing every job to count
//     it on each metrics scrape would cost far more than one GROUP BY.
//   - JobsWaiting: a filter on a job's metadata, which JobList has not.
//   - WakeWaiting, WakeFirstWaiting: JobRetry makes one job available by
//     id, and finding the waiters needs that filter on their metadata.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// RiverJobs describes River jobs whose rows name a user's data: their kind
// and the fields of their JSON arguments holding the user id (empty in a
// legacy job of several users) and the array of event ids, or, for a
// knowledge-base job, the id of the collection it works on. The worker owns
// the job and passes its shape; a zero RiverJobs names no jobs.
type RiverJobs struct {
	Kind, UserField, EventIDsField string
	// CollectionField names the argument holding a collection id (a
	// document job's); such jobs go with their collection
	// (DeleteCollections), not by user. DocField names the one holding the
	// document's id: they also go with their document (DeleteDocument).
	CollectionField, DocField string
	// MoreField names the argument holding other documents of the same
	// collection that a job works on too: such a job is left when one of
	// its documents is deleted (it finds that one gone and works on the
	// others), and goes with its collection.
	MoreField string
}

// deleteUserJobs deletes, inside ForgetUser's transaction (after the user's
// lock), the jobs that name the user's turns, in any state, running ones
// included (a running job then finds its turns gone and stores nothing). A
// job of the user is found through River's GIN index on args (containment);
// a legacy job of several users (replay before migration 012: user field
// "", which every memoryd version wrote) loses the user's event ids, or goes
// when nothing else is left. Another user's turn with the same id loses its
// place in such a job too; the reconciler requeues it. Call it before the
// user's turns are deleted: it reads their ids. (ForgetUser calls it again
// after, for the jobs a transaction it waited for inserted: those name the
// user, as every job since migration 012 does; the legacy stripping finds
// no ids then.)
func (s *Store) deleteUserJobs(ctx context.Context, jobs RiverJobs, userID string) (int64, error) {
	if jobs.Kind == "" || jobs.CollectionField != "" {
		return 0, nil
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM river_job WHERE kind = $1 AND args @> jsonb_build_object($2::text, $3::text)`,
		jobs.Kind, jobs.UserField, userID)
	if err != nil {
		return 0, fmt.Errorf("forget jobs: %w", err)
	}
	// (Every data-modifying WITH clause runs, read or not.)
	var emptied int64
	err = s.db.QueryRow(ctx, `
		WITH mine AS (
			SELECT coalesce(array_agg(event_id), '{}') AS ids FROM turns WHERE user_id = $4
		), stripped AS (
			SELECT j.id, coalesce((SELECT jsonb_agg(e) FROM jsonb_array_elements_text(j.args->$3::text) AS e
			                       WHERE e <> ALL (mine.ids)), '[]'::jsonb) AS rest
			FROM river_job j, mine
			WHERE j.kind = $1 AND j.args @> jsonb_build_object($2::text, '') AND j.args->$3::text ?| mine.ids
		), emptied AS (
			DELETE FROM river_job j USING stripped s WHERE j.id = s.id AND s.rest = '[]'::jsonb RETURNING 1
		), updated AS (
			UPDATE river_job j SET args = jsonb_set(j.args, ARRAY[$3::text], s.rest)
			FROM stripped s WHERE j.id = s.id AND s.rest <> '[]'::jsonb RETURNING 1
		)
		SELECT count(*) FROM emptied`, jobs.Kind, jobs.UserField, jobs.EventIDsField, userID).Scan(&emptied)
	if err != nil {
		return 0, fmt.Errorf("forget jobs of several users: %w", err)
	}
	return tag.RowsAffected() + emptied, nil
}

// lockUserJobs locks the jobs of every shape of jobs that name the user
// (as deleteUserJobs finds them, legacy jobs of several users naming one
// of the user's turns among them), in id order, as a takeover locks the
// running jobs it ends (endRunning): deleted shape by shape, as each
// delete met them, a forget held an extraction job of the user and
// waited for an embed job of the user a takeover held while it waited
// for the extraction job (TestTakeOverBesideForgetOfJobsOfTwoShapes);
// and with the legacy jobs left to their own statement, a forget held
// the user's job and waited for a legacy job lying before it
// (TestTakeOverBesideForgetOfALegacyJob). Call it before the user's turns
// are deleted: it reads their ids (ForgetUser calls it again after, before
// its second delete, when only jobs naming the user are left to find).
func (s *Store) lockUserJobs(ctx context.Context, jobs []RiverJobs, userID string) error {
	var (
		cond []string
		args = []any{userID}
	)
	for _, j := range jobs {
		if j.Kind == "" || j.CollectionField != "" {
			continue
		}
		args = append(args, j.Kind, j.UserField)
		k, u := len(args)-1, len(args)
		cond = append(cond, fmt.Sprintf(`(kind = $%d AND args @> jsonb_build_object($%d::text, $1::text))`, k, u))
		if j.EventIDsField != "" {
			args = append(args, j.EventIDsField)
			cond = append(cond, fmt.Sprintf(`(kind = $%d AND args @> jsonb_build_object($%d::text, '') AND args->$%d::text ?| (SELECT ids FROM mine))`, k, u, len(args)))
		}
	}
	if len(cond) == 0 {
		return nil
	}
	// The user's event ids in a subquery, read once (when a legacy job is
	// met), not joined: joined, every row locked carried the whole array
	// into the sort for its recheck (30,000 turns, 1,000 jobs: a 470 MB
	// sort on disk, 2.5 s; TestForgetOfAUserOfManyTurnsAndJobsSortsInMemory).
	if _, err := s.db.Exec(ctx, `WITH mine AS MATERIALIZED (
			SELECT coalesce(array_agg(event_id), '{}') AS ids FROM turns WHERE user_id = $1
		)
		SELECT FROM river_job WHERE `+strings.Join(cond, " OR ")+` ORDER BY id FOR UPDATE`, args...); err != nil {
		return fmt.Errorf("forget jobs: lock: %w", err)
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
	// Claimed tells that it held jobs it had claimed (ClaimJobs), which
	// went back to River marked unclaimable.
	Claimed bool
}

// TakeOverJobs declares dead every process whose heartbeat is older than
// deadAfter (by Postgres's clock, the one clock every process shares),
// deletes their rows, and ends their running jobs: each is set to cancelled,
// with an error saying why, and returned, so that the caller inserts a
// replacement in the same transaction. Call it inside InTx.
//
// River's client cannot retry a running job (JobRetry skips it) and
// its rescuer waits RescueStuckJobsAfter; ending the row, rather than setting
// it back to available, means that a late completion from the old process
// (River's completer only updates rows still 'running') can never change
// the replacement. Deleting the process rows first locks them, so a
// concurrent Heartbeat of a process declared dead waits for this transaction
// and then learns it is dead; two processes taking over at once serialise on
// the same rows and the second finds nothing. Jobs of ids without a row
// (processes of an older memoryd) are left to River's rescuer.
//
// It declares no process dead when Postgres's clock is ahead of s's Clock
// by more than MaxClockJump and the reading's uncertainty: the clock
// stepped since the last reading, and every heartbeat looks that much
// older (the caller holds takeovers back for a while once a reading sees
// the jump).
func (s *Store) TakeOverJobs(ctx context.Context, deadAfter time.Duration) ([]TakenJob, error) {
	var notAfter *time.Time
	if _, unc, ok := s.Clock().Offset(); ok {
		t := s.Clock().Now().Add(MaxClockJump + unc)
		notAfter = &t
	}
	rows, err := s.db.Query(ctx, `DELETE FROM memoryd_processes
		WHERE heartbeat_at < now() - $1::interval AND ($2::timestamptz IS NULL OR now() <= $2)
		RETURNING id`, deadAfter, notAfter)
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
	jobs, err := s.endRunning(ctx, `attempted_by[array_upper(attempted_by, 1)] = ANY($1)`,
		`' stopped while running this job; a new job took it over'`, dead)
	if err != nil {
		return nil, err
	}
	return s.endClaims(ctx, jobs)
}

// endRunning sets the running jobs of the last process that took them
// (the last of attempted_by) that where (SQL, of args) selects to
// cancelled, with the error "memoryd: process <id>" followed by why (an
// SQL string literal), and returns them.
func (s *Store) endRunning(ctx context.Context, where, why string, args ...any) ([]TakenJob, error) {
	// Locked in id order, as a forget locks its user's jobs
	// (lockUserJobs): as the update met them, a dead process's embed job
	// lying before its extraction job of the same user, each held one the
	// other waited for (TestTakeOverBesideForgetOfJobsOfTwoShapes).
	rows, err := s.db.Query(ctx, `
		WITH locked AS MATERIALIZED (
			SELECT id FROM river_job WHERE state = 'running' AND `+where+` ORDER BY id FOR UPDATE)
		UPDATE river_job j SET
			state = 'cancelled',
			finalized_at = now(),
			errors = array_append(j.errors, jsonb_build_object(
				'at', now(), 'attempt', j.attempt, 'trace', '',
				'error', 'memoryd: process ' || j.attempted_by[array_upper(j.attempted_by, 1)] || `+why+`))
		FROM locked l
		WHERE j.id = l.id AND j.state = 'running'
		RETURNING j.id, j.kind, j.attempted_by[array_upper(j.attempted_by, 1)], j.args, j.queue, j.attempt, j.max_attempts, j.metadata, coalesce(j.attempted_at, now())`,
		args...)
	if err != nil {
		return nil, fmt.Errorf("take over jobs: %w", err)
	}
	return collectTaken(rows)
}

// RunningJobsOf returns the ids of the jobs River marks running in
// process that it fetched over after ago, by Postgres's clock: the
// candidates of TakeOverLostJobs, which the process checks against the
// jobs it runs.
func (s *Store) RunningJobsOf(ctx context.Context, process string, after time.Duration) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM river_job
		WHERE state = 'running' AND attempted_by[array_upper(attempted_by, 1)] = $1::text AND attempted_at < now() - $2::interval`,
		process, after)
	if err != nil {
		return nil, fmt.Errorf("running jobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("running jobs: %w", err)
	}
	return ids, nil
}

// TakeOverLostJobs ends the jobs ids, which River marks running in the
// live process process but which it does not run: their fetch committed
// but its rows never reached the process (a Postgres connection cut in
// between leaves them running with no one to run them, until River's
// rescuer finds them 2 × JobTimeout later, 20 minutes by default). Each
// still running there is set to cancelled, with an error saying why, and
// returned as TakeOverJobs returns them, so that the caller inserts a
// replacement in the same transaction. Call it inside InTx.
func (s *Store) TakeOverLostJobs(ctx context.Context, process string, ids []int64) ([]TakenJob, error) {
	jobs, err := s.endRunning(ctx, `id = ANY($2::bigint[]) AND attempted_by[array_upper(attempted_by, 1)] = $1::text`,
		`' never received this job from its fetch (a lost connection); a new job took it over'`, process, ids)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	return s.endClaims(ctx, jobs)
}

// collectTaken reads the jobs a takeover's UPDATE returned.
func collectTaken(rows pgx.Rows) ([]TakenJob, error) {
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TakenJob, error) {
		var j TakenJob
		err := r.Scan(&j.ID, &j.Kind, &j.Process, &j.Args, &j.Queue, &j.Attempt, &j.MaxAttempts, &j.Metadata, &j.AttemptedAt)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("take over jobs: %w", err)
	}
	return jobs, nil
}

// endClaims ends the claims of the jobs a takeover ended.
func (s *Store) endClaims(ctx context.Context, jobs []TakenJob) ([]TakenJob, error) {
	// A debounced burst job holds a claim on its conversation's turns; its
	// replacement is a new job that cannot take that claim back, so the
	// claims of the jobs taken over end here (else the burst would wait for
	// the claim to expire, a job timeout later).
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	// The turns are locked in (turn_at, event_id) order, as saves, claims
	// and a replay's requeue lock them: locked as the update met them,
	// beside a replay of the same turns each held one the other waited for
	// (TestReplayBesideTakeOverOfAJobClaimingDisorderedTurns).
	if _, err := s.db.Exec(ctx, `WITH locked AS MATERIALIZED (
			SELECT user_id, event_id FROM turns WHERE claimed_by = ANY($1)
			ORDER BY turn_at, event_id, user_id FOR UPDATE)
		UPDATE turns t SET claimed_until = NULL, claimed_by = NULL
		FROM locked l WHERE t.user_id = l.user_id AND t.event_id = l.event_id AND t.claimed_by = ANY($1)`, ids); err != nil {
		return nil, fmt.Errorf("take over jobs: release claims: %w", err)
	}
	// Likewise the jobs they claimed (ClaimJobs) go back to River now
	// rather than when their lease ends, each to run alone.
	// So do those of a claimer whose row is gone (its user's forget
	// deleted it while it ran): whether or not its process is the dead
	// one, no takeover would find it, and they would wait for their lease.
	// One another transaction holds is skipped, as FinishClaimed skips it,
	// and waits out its lease: a forget that locked it (its user's jobs)
	// may be waiting for its claimer, a running job of the same user
	// locked above; waited for, each held what the other waited for
	// (TestTakeOverBesideForgetOfAClaimedJob).
	rows, err := s.db.Query(ctx, `UPDATE river_job j SET state = 'available', scheduled_at = least(j.created_at, now()),
			metadata = (j.metadata - $2::text) || jsonb_build_object($3::text, true)
		FROM (SELECT id, (metadata->>$2::text)::bigint AS claimer FROM river_job c
		      WHERE c.state = 'scheduled' AND c.metadata->>$2::text IS NOT NULL
		        AND (c.metadata->>$2::text = ANY($1::bigint[]::text[])
		             OR NOT EXISTS (SELECT FROM river_job r WHERE r.id = (c.metadata->>$2::text)::bigint))
		      ORDER BY id FOR UPDATE OF c SKIP LOCKED) old
		WHERE j.id = old.id
		RETURNING old.claimer`, ids, ClaimedByKey, UnclaimableKey)
	if err != nil {
		return nil, fmt.Errorf("take over jobs: release claimed jobs: %w", err)
	}
	claimers, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("take over jobs: release claimed jobs: %w", err)
	}
	for i := range jobs {
		jobs[i].Claimed = slices.Contains(claimers, jobs[i].ID)
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
// running, scheduled), that no debounced burst has claimed, and that no
// live job released to claim again (ReleaseClaims: a burst's turns
// between its job's attempts, which their own jobs left to it), with the
// newest discarded job naming each, among the jobs described by jobs. A job
// names a turn when it lists the turn's event id and names the turn's user
// (or no user: a job enqueued before migration 012). It reads the live jobs
// through River's state index
// once per call, and the discarded jobs only for the turns found. A live
// job is matched to a turn by user and event id together, as a set
// difference (EXCEPT), which no plan runs as a nested loop (a job naming
// no user apart, in legacy): event ids are unique per user only, and
// frontends numbering their users' turns (evt-1, evt-2, ...) give
// thousands of pending turns the same id, which a match by event id alone
// compared with every live job of that id (30,000 turns of 20,000 users
// waiting: 120 million comparisons, 3 minutes a run). One statement
// sees one snapshot, and ingest, replay and retry-failed insert a turn's
// job in the transaction that sets it pending, so a turn is never seen
// between the two. The turns returned stay locked until the caller's
// transaction ends, so a forget's delete of them waits for the job the
// caller inserts and then sees it; turns another transaction holds (an
// extraction, a forget) are skipped, for the next call.
func (s *Store) OrphanedTurns(ctx context.Context, jobs RiverJobs, limit int) ([]OrphanedTurn, error) {
	rows, err := s.db.Query(ctx, `
		WITH live AS MATERIALIZED (
			SELECT DISTINCT coalesce(j.args->>$3::text, '') AS user_id, e.event_id
			FROM river_job j, jsonb_array_elements_text(j.args->$4::text) AS e(event_id)
			WHERE j.kind = $1 AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
		), live_job AS MATERIALIZED (
			SELECT id FROM river_job
			WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
		), legacy AS MATERIALIZED (
			SELECT DISTINCT event_id FROM live WHERE user_id = ''
		), orphan_key AS (
			SELECT t.user_id, t.event_id FROM turns t
			WHERE t.status = 'pending' AND (t.claimed_until IS NULL OR t.claimed_until < now())
			EXCEPT
			SELECT t.user_id, t.event_id FROM turns t
			WHERE t.claimed_by IN (SELECT id FROM live_job) AND t.status = 'pending'
			EXCEPT
			SELECT user_id, event_id FROM live
			EXCEPT
			SELECT t.user_id, t.event_id FROM turns t, legacy
			WHERE t.status = 'pending' AND t.event_id = legacy.event_id
		), orphan AS (
			-- Each turn is read back by its key. "IS TRUE" keeps the status
			-- out of the index conditions: with status the planner could
			-- take turns_user_status_idx as well, on a database not
			-- analyzed, where each turn of a user then scanned all the
			-- user's pending turns (TestOrphanedTurnsFindsTurnsByKey).
			SELECT t.event_id, t.user_id, t.received_at FROM orphan_key k JOIN turns t USING (user_id, event_id)
			WHERE (t.status = 'pending') IS TRUE AND (t.claimed_until IS NULL OR t.claimed_until < now())
			ORDER BY t.received_at, t.event_id
			LIMIT $2
			FOR UPDATE OF t SKIP LOCKED
		), discarded AS (
			SELECT DISTINCT ON (o.user_id, o.event_id) o.user_id, o.event_id, j.id, j.attempt
			FROM river_job j, jsonb_array_elements_text(j.args->$4::text) AS e(event_id), orphan o
			WHERE j.kind = $1 AND j.state = 'discarded'
			  AND e.event_id = o.event_id AND coalesce(j.args->>$3::text, '') IN (o.user_id, '')
			ORDER BY o.user_id, o.event_id, j.id DESC
		)
		SELECT o.event_id, o.user_id, coalesce(d.id, 0), coalesce(d.attempt, 0)
		FROM orphan o LEFT JOIN discarded d USING (user_id, event_id)
		ORDER BY o.received_at, o.event_id, o.user_id`, jobs.Kind, limit, jobs.UserField, jobs.EventIDsField)
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

// UnfinishedJobStates are the states QueueDepth counts: River's job
// states of jobs not finished, and ClaimedState.
var UnfinishedJobStates = []string{"available", "scheduled", "retryable", "running", "pending", ClaimedState}

// unfinishedRiverStates are River's states of jobs not finished.
var unfinishedRiverStates = []string{"available", "scheduled", "retryable", "running", "pending"}

// ClaimedState is the state QueueDepth gives a job a running job claimed
// (ClaimJobs): River's state for it is scheduled, which would read as
// work waiting for its time when it is being done.
const ClaimedState = "claimed"

// QueueDepth counts River jobs that are not finished, by queue and state
// (UnfinishedJobStates). Each of queues has every state, 0 when it has no
// such job, so that a gauge reads 0 rather than no data; other queues
// appear when they hold jobs. An available job whose scheduled_at is to
// come (a short snooze, a debounced turn: River and AvailableSoon leave
// them available) counts as scheduled: it is not work waiting for a
// worker, and a debounce counted as a backlog.
func (s *Store) QueueDepth(ctx context.Context, queues ...string) (map[[2]string]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT queue, CASE WHEN state = 'scheduled' AND metadata->>$2::text IS NOT NULL THEN $3
			WHEN state = 'available' AND scheduled_at > now() THEN 'scheduled' ELSE state::text END, count(*)
		FROM river_job
		WHERE state = ANY($1::text[]::river_job_state[])
		GROUP BY 1, 2`, unfinishedRiverStates, ClaimedByKey, ClaimedState)
	if err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	depth := make(map[[2]string]int64, len(queues)*len(UnfinishedJobStates))
	for _, q := range queues {
		for _, st := range UnfinishedJobStates {
			depth[[2]string{q, st}] = 0
		}
	}
	var (
		queue, state string
		n            int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&queue, &state, &n}, func() error {
		depth[[2]string{queue, state}] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	return depth, nil
}

// LiveEmbedJobs counts the River jobs of kinds (embed jobs) that are still
// to run or running for model (their args' "model"; a job naming no model
// counts too), plus the running ones of sweepKinds (which enqueue more of
// them), whatever their arguments. A sweep still waiting to run is not
// counted: it waits on the maintenance queue, which only a serve works,
// and without one it waits forever (the embed command's own River client,
// elected leader, inserts the periodic sweep there), so a wait counting it
// never ended.
func (s *Store) LiveEmbedJobs(ctx context.Context, kinds, sweepKinds []string, model string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM river_job
		WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
		  AND ((kind = ANY($1) AND coalesce(args->>'model', '') IN ($3, '')) OR (kind = ANY($2) AND state = 'running'))`, kinds, sweepKinds, model).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("live embed jobs: %w", err)
	}
	return n, nil
}

// ItemJobs describes River jobs that name items of a user for a model:
// their kind, the queues they wait on, and the fields of their JSON
// arguments holding the user id, the model and the array of item ids. The
// worker owns the job and passes its shape.
type ItemJobs struct {
	Kind                              string
	Queues                            []string
	UserField, ModelField, ItemsField string
}

// NotQueued returns those of refs, in order, that no job of jobs still to
// run or running (River states available, pending, retryable, running,
// scheduled) names for model. A sweep or a backfill that enqueued an item
// a write's job already held had both jobs send its text, twice billed by
// a paid API. One read of the live jobs of refs' users on jobs.Queues
// (River's fetch index: the backlog, not the finished jobs); measured on
// a table shaped like River's, 51 ms for 64 users beside a backlog of
// 40,000 jobs, where a probe of the args index per ref took 2.2 s.
func (s *Store) NotQueued(ctx context.Context, jobs ItemJobs, model string, refs []ContextRef) ([]ContextRef, error) {
	if len(refs) == 0 {
		return refs, nil
	}
	var users []string
	for _, r := range refs {
		if !slices.Contains(users, r.UserID) {
			users = append(users, r.UserID)
		}
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT (e #>> '{}')::bigint FROM river_job j, jsonb_array_elements(j.args->$6::text) e
		WHERE j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled') AND j.queue = ANY($1) AND j.kind = $2
		  AND j.args->>$3::text = $4 AND j.args->>$5::text = ANY($7) AND jsonb_typeof(e) = 'number'`,
		jobs.Queues, jobs.Kind, jobs.ModelField, model, jobs.UserField, jobs.ItemsField, users)
	if err != nil {
		return nil, fmt.Errorf("not queued: %w", err)
	}
	queued, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("not queued: %w", err)
	}
	if len(queued) == 0 {
		return refs, nil
	}
	skip := make(map[int64]bool, len(queued))
	for _, id := range queued {
		skip[id] = true
	}
	out := make([]ContextRef, 0, len(refs))
	for _, r := range refs {
		if !skip[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}

// DeleteOrphanedEmbedJobs deletes the waiting jobs of kinds (embed jobs,
// their model in args' "model") of a model no process that works jobs
// (an enrich-only process records its model too: LiveEmbedModels) has
// recorded (memoryd_processes.embed_model) with a heartbeat within idle, and
// created more than idle ago, and returns how many. After a model change
// they waited forever on their model's queue, which no process works; the
// embed sweep enqueues what a model's items lack when a process of it runs
// again. Whether a process of the model lives is read in the statement
// itself, so one that registers as it runs keeps the jobs it inserts
// (made after it registered, they are not in the statement's snapshot).
//
// The jobs are locked in id order, as a forget locks its user's jobs
// (lockUserJobs), and one another transaction holds is left for the next
// sweep: deleted as the scan met them, beside a forget of their user each
// held a job the other waited for (40P01,
// TestDeleteOrphanedEmbedJobsBesideForget).
func (s *Store) DeleteOrphanedEmbedJobs(ctx context.Context, kinds []string, idle time.Duration) (int64, error) {
	tag, err := s.db.Exec(ctx, `WITH locked AS MATERIALIZED (
			SELECT j.id FROM river_job j
			WHERE j.kind = ANY($1) AND j.state IN ('available', 'pending', 'retryable', 'scheduled')
			  AND j.created_at < now() - $2::interval
			  AND coalesce(j.args->>'model', '') <> ''
			  AND NOT EXISTS (SELECT FROM memoryd_processes p
			                  WHERE p.embed_model = j.args->>'model' AND p.heartbeat_at > now() - $2::interval AND p.id !~ $3)
			ORDER BY j.id FOR UPDATE OF j SKIP LOCKED)
		DELETE FROM river_job j USING locked l WHERE j.id = l.id`, kinds, idle, enrichProcessID)
	if err != nil {
		return 0, fmt.Errorf("delete orphaned embed jobs: %w", err)
	}
	return tag.RowsAffected(), nil
}

// JobClaim asks ClaimJobs for waiting jobs that a running job (Claimer)
// will do together with its own work, so that many small jobs (one per
// write, under live ingest) become one request to a slow server.
type JobClaim struct {
	// Claimer is the running job's id, recorded in each claimed job's
	// metadata (ClaimedByKey).
	Claimer int64
	// Kind and Queue select the jobs.
	Kind, Queue string
	// ItemsField names the JSON array in the jobs' arguments whose length
	// is a job's size; MaxItems bounds the claimed jobs' total.
	ItemsField string
	MaxItems   int
	// Lease is how long the claimed jobs stay away from River: when the
	// claimer neither finishes nor releases them by then (its process
	// died), River's scheduler makes them available again.
	Lease time.Duration
}

// ClaimedJob is a job ClaimJobs took: its id, arguments and metadata.
type ClaimedJob struct {
	ID       int64
	Args     []byte
	Metadata []byte
}

// Metadata keys of claimed jobs. ClaimedByKey holds the claimer's job id
// while the job is claimed and after the claimer finished it (a job River
// runs after its lease ended sets it to null: the claim is over);
// UnclaimableKey marks a job that failed, or was released by a claimer
// that failed, in a way one of its texts may have caused: it runs on its
// own from then on, so that one bad item fails one batch at most.
const (
	ClaimedByKey   = "memoryd_claimed_by"
	UnclaimableKey = "memoryd_unclaimable"
)

// ClaimJobs takes jobs of c.Kind waiting in c.Queue (available now, not
// marked unclaimable; retries included), oldest first in
// River's own fetch order, whose item arrays add up to at most c.MaxItems,
// and sets them aside for c.Claimer: state scheduled until the lease ends,
// the claimer in their metadata. Rows River or another claimer holds are
// skipped, so a job is claimed or fetched once. The claimer then ends them
// with FinishClaimed or ReleaseClaimed; a forget deletes claimed jobs of its
// user like any other.
func (s *Store) ClaimJobs(ctx context.Context, c JobClaim) ([]ClaimedJob, error) {
	if c.MaxItems < 1 {
		return nil, nil
	}
	// One statement: the candidates are locked (each holds one item at
	// least, so MaxItems rows are enough), the oldest that fit are
	// claimed, and the rest are unlocked when it ends.
	rows, err := s.db.Query(ctx, `
		WITH cand AS MATERIALIZED (
			SELECT id, priority, scheduled_at, coalesce(jsonb_array_length(args->$3::text), 0) AS n FROM river_job
			WHERE state = 'available' AND queue = $1 AND kind = $2 AND scheduled_at <= now()
			  AND NOT metadata ? $5::text
			ORDER BY priority, scheduled_at, id
			LIMIT $4
			FOR UPDATE SKIP LOCKED
		), picked AS (
			SELECT id FROM (SELECT id, sum(n) OVER (ORDER BY priority, scheduled_at, id) AS total FROM cand) r WHERE total <= $4
		)
		UPDATE river_job j SET state = 'scheduled', scheduled_at = now() + $6::interval,
			metadata = j.metadata || jsonb_build_object($7::text, $8::bigint)
		FROM picked WHERE j.id = picked.id
		RETURNING j.id, j.args, j.metadata`, c.Queue, c.Kind, c.ItemsField, c.MaxItems, UnclaimableKey, c.Lease, ClaimedByKey, c.Claimer)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	claimed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ClaimedJob, error) {
		var j ClaimedJob
		err := r.Scan(&j.ID, &j.Args, &j.Metadata)
		return j, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	return claimed, nil
}

// FinishClaimed completes the jobs of ids that claimer still holds (a
// forget may have deleted some, an expired lease returned others to
// River), and returns how many it completed (updateClaimed).
func (s *Store) FinishClaimed(ctx context.Context, claimer int64, ids []int64) (int64, error) {
	return s.updateClaimed(ctx, "finish claimed jobs", `UPDATE river_job j SET state = 'completed', finalized_at = now()
		FROM (SELECT id FROM river_job WHERE ($1::bigint[] IS NULL OR id = ANY($1)) AND state = 'scheduled' AND metadata->>$3::text = $2::bigint::text
		      ORDER BY id FOR UPDATE SKIP LOCKED) l
		WHERE j.id = l.id`, ids, claimer, ClaimedByKey)
}

// ReleaseClaimed gives the jobs of ids (every job, when ids is nil) that
// claimer still holds back to River, available after the delay after (at
// once when 0, in the place their age gives them in River's fetch order,
// not behind the jobs that came after them), and returns how many it
// released (updateClaimed). With a mark, the metadata key mark counts in
// each the releases so marked (1 the first time): UnclaimableKey (the
// failed batch may have failed for one of their texts) makes each run
// alone, with its own attempts, from then on; without it (the server was
// overloaded or down, the claimer stopped) they may be claimed again.
//
// A delay up to riverSchedulerInterval leaves the jobs available with a
// future scheduled_at, as River does for its own short snoozes and
// retries: neither River's fetch nor ClaimJobs takes a job before its
// scheduled_at, and a scheduled job waits for River's scheduler, which
// makes due jobs available every 5 s (a release for 10 ms waited up to 5 s).
func (s *Store) ReleaseClaimed(ctx context.Context, claimer int64, ids []int64, mark string, after time.Duration) (int64, error) {
	return s.updateClaimed(ctx, "release claimed jobs", `UPDATE river_job j SET
			state = CASE WHEN $5::interval > $6::interval THEN 'scheduled' ELSE 'available' END::river_job_state,
			scheduled_at = CASE WHEN $5::interval > interval '0' THEN now() + $5::interval ELSE least(j.created_at, now()) END,
			metadata = (j.metadata - $3::text) || CASE WHEN $4 <> '' THEN jsonb_build_object($4::text,
				CASE WHEN jsonb_typeof(j.metadata->$4::text) = 'number' THEN (j.metadata->>$4::text)::numeric + 1 ELSE 1 END) ELSE '{}'::jsonb END
		FROM (SELECT id FROM river_job WHERE ($1::bigint[] IS NULL OR id = ANY($1)) AND state = 'scheduled' AND metadata->>$3::text = $2::bigint::text
		      ORDER BY id FOR UPDATE SKIP LOCKED) l
		WHERE j.id = l.id`, ids, claimer, ClaimedByKey, mark, after, riverSchedulerInterval)
}

// riverSchedulerInterval is how often River's scheduler makes scheduled
// jobs that are due available (its JobSchedulerIntervalDefault, which River
// does not export): River sets a job snoozed or retried within it
// available at once, with a future scheduled_at, rather than scheduled.
const riverSchedulerInterval = 5 * time.Second

// AvailableSoon makes the jobs of ids that are scheduled to run within
// River's scheduler interval available, keeping their scheduled_at, as
// River does for its own short snoozes: neither River's fetch nor
// ClaimJobs takes a job before its scheduled_at, while a scheduled job
// waits for the scheduler, which makes due jobs available every 5 s (a
// debounced extraction of 1 s ran 1 to 6 s after its turn). Jobs due
// later are left to the scheduler. It returns how many it changed.
func (s *Store) AvailableSoon(ctx context.Context, ids []int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.db.Exec(ctx, `UPDATE river_job SET state = 'available'
		WHERE id = ANY($1) AND state = 'scheduled' AND scheduled_at <= now() + $2::interval`, ids, riverSchedulerInterval)
	if err != nil {
		return 0, fmt.Errorf("make jobs available: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Wake says which jobs WakeWaiting wakes and how it marks them.
type Wake struct {
	// SnoozedKey and Reason select the jobs: those whose metadata's
	// SnoozedKey is Reason (the reason of their last snooze).
	SnoozedKey, Reason string
	// WokenKey is set true in each woken job's metadata.
	WokenKey string
	// WaitKey, when not empty, is the metadata key holding the length in
	// milliseconds of the snooze a job is in, counted toward its budget
	// (absent or 0 when the snooze is not counted). What a wake leaves
	// of that length not waited (the length less the time since the run
	// that snoozed the job began, attempted_at; at most the length, and
	// for a job without attempted_at the part of the snooze left,
	// scheduled_at - now()) is added to UnwaitedKey and WaitKey set to
	// 0, so that a job woken early is counted as having waited as long
	// as it did, and not credited twice for one snooze.
	WaitKey, UnwaitedKey string
	// CountKey, when not empty, counts each job's wakes in its metadata,
	// and a job woken MaxWakes times is not woken again: it waits its
	// snoozes out. A job that fails while the server answers the others
	// (a request of its own the server fails) is otherwise run again at
	// every wake, every second or so, for as long as its budget lasts.
	// With a WaitKey, only the wakes of counted snoozes (WaitKey above 0)
	// count: a snooze not counted (a woken job held back by a process yet
	// to see the server answer) sent no request. A wake within CountEvery
	// of the last one counted (at CountedAtKey, in the database's clock,
	// milliseconds since 1970) is not counted either: one answer wakes
	// the waiters again for a few seconds, and a job woken by every serve,
	// so that counted per wake one answer could spend a job's wakes.
	CountKey     string
	MaxWakes     int
	CountedAtKey string
	CountEvery   time.Duration
}

// WakeWaiting makes the jobs of jobs' kind that wait to run (scheduled,
// or available with a scheduled_at to come) after a snooze of wake's
// reason run now, marking them as wake says, and returns how many: the
// worker's waiters for a model server that answers again. River is told,
// as of an insert (riverInsertNotify). A job another transaction holds (a
// forget deleting it, River fetching it) is skipped, not waited for: it
// runs when its snooze ends. So is a claimed job
// (ClaimedByKey: set aside, its last snooze's reason still in its
// metadata, until its claimer ends it): woken, River ran it beside the
// claimer, which embedded its items meanwhile.
//
// What was not waited is measured from attempted_at, which River sets
// from the database's clock when it fetches the job and leaves as it is
// when the run snoozes it, so the run itself counts as waited. Before, it
// was the part of the snooze left (scheduled_at - now()): the spread that
// shortened a snooze counted as waited at each wake (up to 15 s of a
// minute's), and a process whose clock was ahead of the database's
// credited its jobs that much more.
func (s *Store) WakeWaiting(ctx context.Context, jobs RiverJobs, wake Wake) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `WITH woken AS (UPDATE river_job j SET state = 'available', scheduled_at = now(),
			metadata = j.metadata || jsonb_build_object($4::text, true) || CASE WHEN $5::text = '' THEN '{}'::jsonb
				ELSE jsonb_build_object($5::text, 0, $6::text, `+metaInt("$6")+` +
					least(greatest(floor(CASE WHEN j.attempted_at IS NULL THEN extract(epoch FROM j.scheduled_at - now()) * 1000
						ELSE `+metaInt("$5")+` - extract(epoch FROM now() - j.attempted_at) * 1000 END), 0)::bigint, `+metaInt("$5")+`)) END
				|| CASE WHEN $7::text = '' OR ($5::text <> '' AND `+metaInt("$5")+` <= 0)
						OR ($9::text <> '' AND `+metaInt("$9")+` > floor(extract(epoch FROM now()) * 1000)::bigint - $10::bigint)
					THEN '{}'::jsonb
					ELSE jsonb_build_object($7::text, `+metaInt("$7")+` + 1) || CASE WHEN $9::text = '' THEN '{}'::jsonb
						ELSE jsonb_build_object($9::text, floor(extract(epoch FROM now()) * 1000)::bigint) END END
		FROM (SELECT id FROM river_job j WHERE kind = $1 AND state IN ('scheduled', 'available') AND scheduled_at > now()
			AND metadata->>$2::text = $3 AND ($7::text = '' OR `+metaInt("$7")+` < $8) AND metadata->>$11::text IS NULL
			FOR UPDATE SKIP LOCKED) w
		WHERE j.id = w.id RETURNING j.queue), told AS (SELECT DISTINCT queue FROM woken)
		SELECT (SELECT count(*) FROM woken), (SELECT string_agg(`+riverInsertNotify+`, '') FROM told)`, jobs.Kind, wake.SnoozedKey, wake.Reason, wake.WokenKey, wake.WaitKey, wake.UnwaitedKey, wake.CountKey, wake.MaxWakes,
		wake.CountedAtKey, wake.CountEvery.Milliseconds(), ClaimedByKey).Scan(&n, nil)
	if err != nil {
		return 0, fmt.Errorf("wake waiting jobs: %w", err)
	}
	return n, nil
}

// WakeFirstWaiting makes the first of the jobs of jobs' kind that wait to
// run (scheduled, or available with a scheduled_at to come) after a
// snooze of reason (their metadata's snoozedKey) run now, and returns its
// id, 0 when none waits: the one snoozed the most times (its metadata's
// countKey), the oldest of those. For a lock one process holds at a time
// (the worker's requests sent alone after a model server crash): its
// holder wakes the next waiter as it lets it go, so that the lock is not
// left idle while the waiters' snoozes run out, and the one that has
// waited longest goes first rather than whichever comes back first. River
// is told, as of an insert (riverInsertNotify). A job another transaction
// holds, or a claimed one (ClaimedByKey), is skipped: it runs when its
// snooze ends.
func (s *Store) WakeFirstWaiting(ctx context.Context, jobs RiverJobs, snoozedKey, reason, countKey string) (int64, error) {
	var id int64
	err := s.db.QueryRow(ctx, `WITH woken AS (UPDATE river_job j SET state = 'available', scheduled_at = now()
		FROM (SELECT id FROM river_job j WHERE kind = $1 AND state IN ('scheduled', 'available') AND scheduled_at > now()
			AND metadata->>$2::text = $3 AND metadata->>$5::text IS NULL
			ORDER BY `+metaInt("$4")+` DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED) w
		WHERE j.id = w.id RETURNING j.id, j.queue)
		SELECT id, `+riverInsertNotify+` FROM woken`, jobs.Kind, snoozedKey, reason, countKey, ClaimedByKey).Scan(&id, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wake the first waiting job: %w", err)
	}
	return id, nil
}

// riverInsertNotify is the SQL that tells River's producers, every
// process's, that a job of the queue in column queue is available, as
// River's own inserts do (its insert topic, on the schema's channel, which
// each producer listens to): a job woken here is fetched at once, not at
// the next FetchPollInterval (1 s), which gapped the requests sent alone
// after a crash 0.6-0.8 s apart (a walk). Its value, void, reads as empty
// text. Should River rename the topic, the job waits for that poll, as
// before. The channel is River's own for any schema memoryd runs on:
// River listens on "<current_schema()>.river_insert" too, and a schema
// name whose channels Postgres would refuse (over MaxSchemaBytes) is
// refused at start (checkSearchPath).
const riverInsertNotify = `pg_notify(current_schema() || '.river_insert', json_build_object('queue', queue)::text)::text`

// metaInt is the SQL for the whole number at j.metadata's key (the
// parameter param), 0 when it is absent or not a number.
func metaInt(param string) string {
	return `(CASE WHEN jsonb_typeof(j.metadata->` + param + `::text) = 'number' THEN (j.metadata->>` + param + `::text)::numeric::bigint ELSE 0 END)`
}

// Passes of updateClaimed, and the pause between them: 2 s in all.
const (
	claimedUpdatePasses = 40
	claimedUpdatePause  = 50 * time.Millisecond
)

// updateClaimed runs update, an UPDATE of the jobs of ids ($1, every one
// when nil) that claimer ($2) holds, which skips rows another transaction
// has locked, again until none of them is left or claimedUpdatePasses
// passes, and returns how many rows it updated. Skipped rather than waited
// for, so that a forget deleting one of them (which may take seconds) holds
// neither the claimer nor a Stop past its deadline; passed again, because
// a row is also held for a moment by statements that merely looked at it:
// River's fetch or another claim that read it as available before the
// claim and locked it to recheck. Done once, such a moment left the job
// claimed until its lease ended, minutes later. Jobs still held after the
// last pass are an error saying so: they go back to River when their lease
// ends.
func (s *Store) updateClaimed(ctx context.Context, what, update string, args ...any) (int64, error) {
	var n int64
	for pass := 1; ; pass++ {
		tag, err := s.db.Exec(ctx, update, args...)
		if err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
		n += tag.RowsAffected()
		var left int64
		if err := s.db.QueryRow(ctx, `SELECT count(*) FROM river_job
			WHERE ($1::bigint[] IS NULL OR id = ANY($1)) AND state = 'scheduled' AND metadata->>$3::text = $2::bigint::text`,
			args[0], args[1], ClaimedByKey).Scan(&left); err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
		if left == 0 {
			return n, nil
		}
		if pass == claimedUpdatePasses {
			return n, fmt.Errorf("%s: %d held by another transaction after %d passes", what, left, pass)
		}
		if err := sleepCtx(ctx, claimedUpdatePause); err != nil {
			return n, fmt.Errorf("%s: %w", what, err)
		}
	}
}

// JobsWaiting reports whether a job of jobs' kind that is not done yet
// (available, retryable, running or scheduled), scheduled within the last
// recent or later, has its metadata's snoozedKey at reason (the reason of
// its last snooze: the worker's for a model server that is down), so that
// a process starting during an outage other processes saw knows it. A job
// back from its snooze is available, or running, before it meets the
// server again, so every state counts; one whose last wait is long past
// (scheduled before recent), or that has spent an attempt or snoozed for
// another reason since (a database out of reach), does not. Before, any
// job that had ever waited for the server counted.
func (s *Store) JobsWaiting(ctx context.Context, jobs RiverJobs, snoozedKey, reason string, recent time.Duration) (bool, error) {
	var waiting bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM river_job WHERE state IN ('available', 'retryable', 'running', 'scheduled') AND kind = $1
		AND scheduled_at > now() - $3::interval
		AND metadata->>$2::text = $4)`, jobs.Kind, snoozedKey, recent, reason).Scan(&waiting)
	if err != nil {
		return false, fmt.Errorf("jobs waiting: %w", err)
	}
	return waiting, nil
}
