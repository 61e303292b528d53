package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// A forget deletes the user's River jobs of each shape it is given, and a
// takeover ends the running jobs of a dead process, then the turns they
// claimed, then the jobs they claimed (endClaims). Both lock job rows of
// the same user: the forget took them shape by shape, each as its delete
// met them, the takeover as its updates met them, so each could hold a job
// the other waited for and Postgres failed one of them (40P01): a forget
// that told its caller it failed, or a takeover that left the dead
// process's jobs running for the next heartbeat. Each test below forces
// that interleaving with a third transaction holding a row one of the two
// meets midway; both must succeed.

// testEmbedJobs is a second job shape, without event ids, as the worker's
// embed jobs are.
var testEmbedJobs = store.RiverJobs{Kind: "test_embed", UserField: "owner"}

// A dead process ran an embed job and an extraction job of alice, the
// embed job lying first in the table and in its queue's order. The forget
// deletes her extraction jobs (the running one, then one the third
// transaction holds) and then her embed jobs; the takeover locks the
// embed job, then waits for the running extraction job. Locked in id
// order, by both, neither holds a job the other waits for, whichever of
// the two jobs is the older.
func TestTakeOverBesideForgetOfJobsOfTwoShapes(t *testing.T) {
	t.Parallel()
	for _, embedID := range []string{"NULL", "1000000"} {
		t.Run("embed job id "+embedID, func(t *testing.T) {
			ctx, s := setup(t)
			ids := insertJobs(t, ctx, s, `
				(`+embedID+`, 'e', 'test_embed', 'embed', 'running', '{"owner": "alice"}'),
				(NULL, 'x1', 'test_extract', 'extract', 'running', '{"owner": "alice", "turn_ids": ["a"]}'),
				(NULL, 'x2', 'test_extract', 'extract', 'available', '{"owner": "alice", "turn_ids": ["b"]}')`)
			deadProcess(t, ctx, s)
			hold, holder := begin(t, s)
			if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["x2"]); err != nil {
				t.Fatal(err)
			}
			var removed store.Removed
			forget, forgot := waitingOn(t, s, holder, "the forget", "the held job", func() error {
				var err error
				removed, _, err = s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs, testEmbedJobs)
				return err
			})
			_, took := waitingOn(t, s, forget, "the takeover", "the forget", func() error { return takeOver(ctx, s, nil) })
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if ferr, terr := <-forgot, <-took; ferr != nil || terr != nil {
				t.Fatalf("forget: %v; takeover: %v; want both done", ferr, terr)
			}
			if removed.Jobs != 3 {
				t.Errorf("the forget deleted %d jobs, want 3", removed.Jobs)
			}
			jobsOfAliceGone(t, ctx, s)
		})
	}
}

// A dead process ran an embed job of alice, r, which had claimed another,
// c, lying before it, and an extraction job of bob, whose claimed turn the
// third transaction holds: the takeover locks r and waits for the turn;
// the forget deletes c and waits for r; the takeover then releases c.
func TestTakeOverBesideForgetOfAClaimedJob(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "b1", UserID: "bob", ConversationID: "c", UserMessage: "Gate 9", TurnAt: past}}); err != nil {
		t.Fatal(err)
	}
	var c, r int64
	if err := s.Pool().QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence('river_job', 'id')), nextval(pg_get_serial_sequence('river_job', 'id'))`).Scan(&c, &r); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (id, kind, args, queue, state, max_attempts, attempt, attempted_at, attempted_by, metadata, scheduled_at)
		VALUES ($1, 'test_embed', '{"owner": "alice"}', 'q', 'scheduled', 5, 0, NULL, NULL, jsonb_build_object($3::text, $2::bigint), now() + interval '1 hour'),
		       ($2, 'test_embed', '{"owner": "alice"}', 'q', 'running', 5, 1, now(), ARRAY['dead-proc'], '{}', now())`, c, r, store.ClaimedByKey); err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, ctx, s, `(NULL, 'xb', 'test_extract', 'extract', 'running', '{"owner": "bob", "turn_ids": ["b1"]}')`)
	if _, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: ids["xb"], UserID: "bob", ConversationID: "c", Limit: 1, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	deadProcess(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM turns WHERE user_id = 'bob' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var taken []store.TakenJob
	takeover, took := waitingOn(t, s, holder, "the takeover", "the held turn", func() error { return takeOver(ctx, s, &taken) })
	_, forgot := waitingOn(t, s, takeover, "the forget", "the takeover", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs, testEmbedJobs)
		return err
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if terr, ferr := <-took, <-forgot; ferr != nil || terr != nil {
		t.Fatalf("takeover: %v; forget: %v; want both done", terr, ferr)
	}
	if len(taken) != 2 {
		t.Errorf("took over %+v, want r and bob's job", taken)
	}
	jobsOfAliceGone(t, ctx, s)
	var claimed int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE claimed_by IS NOT NULL`).Scan(&claimed); err != nil || claimed != 0 {
		t.Fatalf("%d turns claimed after the takeover (%v), want none", claimed, err)
	}
}

// insertJobs inserts, in one statement and so in that order in the table,
// the jobs of values, rows of (id, name, kind, queue, state, args), of the next
// id when id is NULL; a running one ran in dead-proc. It returns their ids
// by name.
func insertJobs(t *testing.T, ctx context.Context, s *store.Store, values string) map[string]int64 {
	t.Helper()
	rows, err := s.Pool().Query(ctx, `INSERT INTO river_job (id, kind, args, queue, state, max_attempts, attempt, attempted_at, attempted_by, metadata)
		SELECT coalesce(id::bigint, nextval(pg_get_serial_sequence('river_job', 'id'))), kind, args::jsonb, queue, state::river_job_state, 5,
		       CASE WHEN state = 'running' THEN 1 ELSE 0 END, CASE WHEN state = 'running' THEN now() END,
		       CASE WHEN state = 'running' THEN ARRAY['dead-proc'] END, jsonb_build_object('name', name)
		FROM (VALUES `+values+`) AS v(id, name, kind, queue, state, args)
		RETURNING metadata->>'name', id`)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	var (
		name string
		id   int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &id}, func() error {
		ids[name] = id
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// deadProcess records dead-proc, whose heartbeat is an hour old.
func deadProcess(t *testing.T, ctx context.Context, s *store.Store) {
	t.Helper()
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, started_at, heartbeat_at) VALUES ('dead-proc', now() - interval '1 hour', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
}

// takeOver takes over the jobs of the processes dead for a minute, as the
// worker does (TakeOverJobs in a transaction), into taken unless nil.
func takeOver(ctx context.Context, s *store.Store, taken *[]store.TakenJob) error {
	return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		jobs, err := q.TakeOverJobs(ctx, time.Minute)
		if taken != nil {
			*taken = jobs
		}
		return err
	})
}

// jobsOfAliceGone fails the test unless no job names alice.
func jobsOfAliceGone(t *testing.T, ctx context.Context, s *store.Store) {
	t.Helper()
	var left []string
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(kind || ' ' || state), '{}') FROM river_job WHERE args->>'owner' = 'alice'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatal(fmt.Sprint("jobs of alice left after her forget: ", left))
	}
}
