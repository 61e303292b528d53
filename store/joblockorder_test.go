package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
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

// A legacy job of several users (replay before migration 012: its user
// field empty) loses the forgotten user's event ids in a statement of its
// own, after the forget locked the user's own jobs (lockUserJobs), as
// that statement met it: a dead process ran a legacy job naming alice's
// turn, l, lying before a job of alice, j; the takeover locks l, then j,
// in id order. The third transaction holds j: the forget waits for it,
// the takeover locks l and waits for j; once j is let go, the forget
// waits for l.
func TestTakeOverBesideForgetOfALegacyJob(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "a1", UserID: "alice", UserMessage: "Gate 9", TurnAt: past}}); err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, ctx, s, `
		(NULL, 'l', 'test_extract', 'extract', 'running', '{"owner": "", "turn_ids": ["a1", "b1"]}'),
		(NULL, 'j', 'test_extract', 'extract', 'running', '{"owner": "alice", "turn_ids": ["a1"]}')`)
	deadProcess(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["j"]); err != nil {
		t.Fatal(err)
	}
	forget, forgot := waitingOn(t, s, holder, "the forget", "the held job", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs)
		return err
	})
	took := make(chan error, 1)
	go func() { took <- takeOver(ctx, s, nil) }()
	blockedByEither(t, s, holder, forget, func() bool { return len(took) > 0 }, "the takeover to wait for the forget or the held job, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, terr := <-forgot, <-took; ferr != nil || terr != nil {
		t.Fatalf("forget: %v; takeover: %v; want both done", ferr, terr)
	}
	jobsOfAliceGone(t, ctx, s)
	var turnIDs []string
	if err := s.Pool().QueryRow(ctx, `SELECT array(SELECT jsonb_array_elements_text(args->'turn_ids')) FROM river_job WHERE id = $1`, ids["l"]).Scan(&turnIDs); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(turnIDs) != "[b1]" {
		t.Fatalf("the legacy job names the turns %v after alice's forget, want [b1]", turnIDs)
	}
}

// Two forgets of users named by the same legacy jobs: each deleted the
// jobs left with none of its event ids, then edited the others, so that
// a job one of them deleted the other edited, and the other way round.
// Event ids are the users' own (two users' frontends may both count 1,
// 2, ...): alice's forget deletes x (a1 and s, both hers) and z (a2) and
// edits y (b1, t: t is hers too); bob's deletes y and edits x (s is his
// too). The third transaction holds z: alice's forget deletes x and
// waits for it; bob's deletes y and waits for x; once z is let go,
// alice's waits for y.
func TestForgetsOfTwoUsersOfTheSameLegacyJobs(t *testing.T) {
	ctx, s := setup(t)
	var turns []store.Turn
	for _, u := range []struct{ user, event string }{{"alice", "a1"}, {"alice", "a2"}, {"alice", "s"}, {"alice", "t"}, {"bob", "b1"}, {"bob", "s"}, {"bob", "t"}} {
		turns = append(turns, store.Turn{EventID: u.event, UserID: u.user, UserMessage: "Gate 9", TurnAt: past})
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, ctx, s, `
		(NULL, 'x', 'test_extract', 'extract', 'available', '{"owner": "", "turn_ids": ["a1", "s"]}'),
		(NULL, 'z', 'test_extract', 'extract', 'available', '{"owner": "", "turn_ids": ["a2"]}'),
		(NULL, 'y', 'test_extract', 'extract', 'available', '{"owner": "", "turn_ids": ["b1", "t"]}')`)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["z"]); err != nil {
		t.Fatal(err)
	}
	alices, aliceForgot := waitingOn(t, s, holder, "alice's forget", "the held job", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs)
		return err
	})
	bobForgot := make(chan error, 1)
	go func() {
		_, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{}, testJobs)
		bobForgot <- err
	}()
	blockedByEither(t, s, holder, alices, func() bool { return len(bobForgot) > 0 }, "bob's forget to wait for alice's or the held job, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if aerr, berr := <-aliceForgot, <-bobForgot; aerr != nil || berr != nil {
		t.Fatalf("alice's forget: %v; bob's: %v; want both done", aerr, berr)
	}
	var left []string
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(args::text), '{}') FROM river_job WHERE kind = 'test_extract'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("jobs left after both forgets: %v, want none", left)
	}
}

// The delete of embed jobs of a model no process runs
// (DeleteOrphanedEmbedJobs, every user's) met them in its plan's order,
// the table's, and a forget locks its user's jobs in id order: alice's
// orphaned jobs o1 and o2, o1's row written again since (a snooze, a
// retry), lie in the order o2, o1. The third transaction holds o1: the
// forget waits for it; the delete locks o2 and waits for o1; once o1 is
// let go, the forget waits for o2.
func TestDeleteOrphanedEmbedJobsBesideForget(t *testing.T) {
	ctx, s := setup(t)
	ids := insertJobs(t, ctx, s, `
		(NULL, 'o1', 'test_embed', 'embed', 'available', '{"owner": "alice", "model": "gone"}'),
		(NULL, 'o2', 'test_embed', 'embed', 'available', '{"owner": "alice", "model": "gone"}')`)
	if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET scheduled_at = scheduled_at + interval '1 second' WHERE id = $1`, ids["o1"]); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	err = tx.QueryRow(ctx, `WITH d AS (DELETE FROM river_job j WHERE j.kind = ANY($1) AND j.created_at < now() - $2::interval
			AND coalesce(j.args->>'model', '') <> '' RETURNING id) SELECT array_agg(id) FROM d`, []string{"test_embed"}, time.Microsecond).Scan(&order)
	tx.Rollback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{ids["o2"], ids["o1"]}; fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("the delete of orphaned jobs meets them in the order %v, want %v (the table's)", order, want)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["o1"]); err != nil {
		t.Fatal(err)
	}
	forget, forgot := waitingOn(t, s, holder, "the forget", "the held job", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testEmbedJobs)
		return err
	})
	deleted := make(chan error, 1)
	go func() {
		_, err := s.DeleteOrphanedEmbedJobs(ctx, []string{"test_embed"}, time.Microsecond)
		deleted <- err
	}()
	blockedByEither(t, s, holder, forget, func() bool { return len(deleted) > 0 }, "the delete to wait for the forget or the held job, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, derr := <-forgot, <-deleted; ferr != nil || derr != nil {
		t.Fatalf("forget: %v; delete of orphaned embed jobs: %v; want both done", ferr, derr)
	}
	jobsOfAliceGone(t, ctx, s)
}

// DeleteOrphanedEmbedJobs deletes the waiting jobs of a model no live
// process records, and keeps a running one of it and the waiting ones of
// a model a live process records.
func TestDeleteOrphanedEmbedJobsKeepsLiveModelsAndRunningJobs(t *testing.T) {
	ctx, s := setup(t)
	if err := s.RegisterProcess(ctx, "live-proc", store.ProcessRecord{EmbedModel: "live"}); err != nil {
		t.Fatal(err)
	}
	// Its heartbeat within the microsecond idle the jobs are over.
	if _, err := s.Pool().Exec(ctx, `UPDATE memoryd_processes SET heartbeat_at = now() + interval '1 hour' WHERE id = 'live-proc'`); err != nil {
		t.Fatal(err)
	}
	ids := insertJobs(t, ctx, s, `
		(NULL, 'gone-waiting', 'test_embed', 'embed', 'available', '{"owner": "alice", "model": "gone"}'),
		(NULL, 'gone-running', 'test_embed', 'embed', 'running', '{"owner": "alice", "model": "gone"}'),
		(NULL, 'live-waiting', 'test_embed', 'embed', 'available', '{"owner": "alice", "model": "live"}'),
		(NULL, 'other-kind', 'test_extract', 'extract', 'available', '{"owner": "alice", "model": "gone"}')`)
	n, err := s.DeleteOrphanedEmbedJobs(ctx, []string{"test_embed"}, time.Microsecond)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d orphaned jobs (%v), want 1", n, err)
	}
	var left []string
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(metadata->>'name' ORDER BY id) FROM river_job WHERE id = ANY($1)`,
		[]int64{ids["gone-waiting"], ids["gone-running"], ids["live-waiting"], ids["other-kind"]}).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[gone-running live-waiting other-kind]" {
		t.Fatalf("jobs left %v, want all but gone-waiting", left)
	}
}

// A forget of a user's documents (DeleteCollections), a delete of a
// document (DeleteDocument, in the transaction docs.delete runs it in) and
// the finish of a forget cut short (DeleteDocumentsBefore) deleted the jobs
// naming the documents shape by shape (index jobs, then chunk embed
// jobs), and a takeover ends a dead process's running jobs in id order:
// each held a job the other waited for (40P01). The dead process ran a
// chunk embed job c and an index job i of alice's document, c the older;
// the third transaction holds another index job h of it: the delete
// deletes i and waits for h, the takeover locks c and waits for i, then
// the delete goes on to c.
func TestTakeOverBesideDeletesOfDocumentJobsOfTwoShapes(t *testing.T) {
	t.Parallel()
	for name, del := range map[string]func(ctx context.Context, s *store.Store) (int64, error){
		"forget": func(ctx context.Context, s *store.Store) (int64, error) {
			return s.DeleteCollections(ctx, alice, docJobs...)
		},
		"delete": func(ctx context.Context, s *store.Store) (int64, error) {
			var n int64
			err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
				ok, err := q.DeleteDocument(ctx, alice, "notes", "d", docJobs...)
				if ok {
					n = 1
				}
				return err
			})
			return n, err
		},
		"finish of a forget cut short": func(ctx context.Context, s *store.Store) (int64, error) {
			return s.DeleteDocumentsBefore(ctx, "alice", time.Now().Add(time.Hour), docJobs...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, s := setup(t)
			coll := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"}).Collection.ID
			args := fmt.Sprintf(`'{"collection_id": %d, "doc_id": "d"}'`, coll)
			ids := insertJobs(t, ctx, s, `
				(NULL, 'c', 'memoryd_chunk_embed', 'embed', 'running', `+args+`),
				(NULL, 'i', 'index_document', 'docs', 'running', `+args+`),
				(NULL, 'h', 'index_document', 'docs', 'available', `+args+`)`)
			deadProcess(t, ctx, s)
			hold, holder := begin(t, s)
			if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["h"]); err != nil {
				t.Fatal(err)
			}
			var deleted int64
			deleter, done := waitingOn(t, s, holder, "the "+name, "the held job", func() error {
				var err error
				deleted, err = del(ctx, s)
				return err
			})
			_, took := waitingOn(t, s, deleter, "the takeover", "the "+name, func() error { return takeOver(ctx, s, nil) })
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if derr, terr := <-done, <-took; derr != nil || terr != nil {
				t.Fatalf("%s: %v; takeover: %v; want both done", name, derr, terr)
			}
			if deleted != 1 {
				t.Errorf("the %s deleted %d documents, want 1", name, deleted)
			}
			var left int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind IN ('index_document', 'memoryd_chunk_embed')`).Scan(&left); err != nil || left != 0 {
				t.Fatalf("%d jobs of alice's document left (%v), want none", left, err)
			}
		})
	}
}

// A forget deletes the user's jobs a second time after its turns and
// memory, for the jobs a transaction it waited for inserted meanwhile
// (after its first lock of the user's jobs). A dead process ran two such
// jobs of alice, j1 and j2, lying in the table in the other order than
// their ids, and a job of bob, m, whose id lies between: the takeover
// locks j1, then waits for m, which the third transaction holds; the
// forget, once its held turn is let go, deletes j2 and waits for j1; the
// takeover, once m is let go, waits for j2.
func TestTakeOverBesideForgetOfJobsInsertedDuringIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Five connections at once: the turn's holder has one of its own,
	// outside the store's pool (storetest.MaxConns).
	url := storetest.Migrated(t)
	s := storetest.Unmigrated(t, url)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "a1", UserID: "alice", UserMessage: "Gate 9", TurnAt: past}}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	turnHold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	turnHolder := int(conn.PgConn().PID())
	if _, err := turnHold.Exec(ctx, `SELECT FROM turns WHERE user_id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var removed store.Removed
	forget, forgot := waitingOn(t, s, turnHolder, "the forget", "the held turn", func() error {
		var err error
		removed, _, err = s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{}, testJobs)
		return err
	})
	ids := insertJobs(t, ctx, s, `
		(1000002, 'j2', 'test_extract', 'extract', 'running', '{"owner": "alice", "turn_ids": ["a2"]}'),
		(1000000, 'j1', 'test_extract', 'extract', 'running', '{"owner": "alice", "turn_ids": ["a3"]}'),
		(1000001, 'm', 'test_extract', 'extract', 'running', '{"owner": "bob", "turn_ids": ["b1"]}')`)
	deadProcess(t, ctx, s)
	jobHold, jobHolder := begin(t, s)
	if _, err := jobHold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["m"]); err != nil {
		t.Fatal(err)
	}
	takeover, took := waitingOn(t, s, jobHolder, "the takeover", "the held job", func() error { return takeOver(ctx, s, nil) })
	if err := turnHold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if blockedBy(t, s, takeover, func() bool { return len(forgot) > 0 }, "the forget to wait for the takeover") != forget {
		t.Fatalf("the forget did not wait for the takeover: %v", <-forgot)
	}
	if err := jobHold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, terr := <-forgot, <-took; ferr != nil || terr != nil {
		t.Fatalf("forget: %v; takeover: %v; want both done", ferr, terr)
	}
	if removed.Jobs != 2 {
		t.Errorf("the forget deleted %d jobs, want 2", removed.Jobs)
	}
	jobsOfAliceGone(t, ctx, s)
}
