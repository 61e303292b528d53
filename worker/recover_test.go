package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// recordTurns records turns as ingest does, with one extraction job each,
// inserted by a client that works no jobs (like retry-failed's); it returns
// the job ids by event id.
func (e *env) recordTurns(turns ...store.Turn) map[string]int64 {
	e.t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	jobs := map[string]int64{}
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, turns); err != nil {
			return err
		}
		for _, t := range turns {
			res, err := client.InsertTx(e.ctx, tx, worker.ExtractArgs{UserID: t.UserID, EventIDs: []string{t.EventID}}, nil)
			if err != nil {
				return err
			}
			jobs[t.EventID] = res.Job.ID
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs
}

// exec runs SQL that stages River's job table or the process table the way
// a crash leaves them.
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.store.Pool().Exec(e.ctx, sql, args...); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) jobState(id int64) string {
	e.t.Helper()
	var state string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text FROM river_job WHERE id = $1`, id).Scan(&state); err != nil {
		e.t.Fatal(err)
	}
	return state
}

func (e *env) turnStatus(id string) store.Turn {
	e.t.Helper()
	var user string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT user_id FROM turns WHERE event_id = $1`, id).Scan(&user); err != nil {
		e.t.Fatal(err)
	}
	t, err := e.store.GetTurn(e.ctx, user, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return t
}

func recoverTurn(id, user string) store.Turn {
	return store.Turn{EventID: id, UserID: user, UserMessage: "I live in Lisbon.", AssistantResponse: "Noted.", TurnAt: t0}
}

// A job's waits so far, which its replacement keeps counting: for the
// model server (or the embeddings server), with the part of them not
// waited (their spread, what wakes cut short), its woken and unsent holds, its
// wakes and when the last was counted; for the database, with their
// spread. Not the snooze it was woken from: the replacement runs at once,
// neither snoozed nor woken.
var (
	carriedWaits = map[string]string{"memoryd_model_waits": "3", "memoryd_model_unwaited_ms": "40000", "memoryd_woken_holds": "1", "memoryd_unsent_holds": "2",
		"memoryd_wakes": "2", "memoryd_wake_counted_at": "1764860000000", "memoryd_db_waits": "4", "memoryd_db_unwaited_ms": "9000"}
	droppedWaits = map[string]string{"memoryd_snoozed_for": `"model_unreachable"`, "memoryd_woken": "true"}
)

// setWaits gives job the metadata of carriedWaits and droppedWaits.
func (e *env) setWaits(job int64) {
	e.t.Helper()
	var waited []string
	for _, m := range []map[string]string{carriedWaits, droppedWaits} {
		for k, v := range m {
			waited = append(waited, fmt.Sprintf("%q: %s", k, v))
		}
	}
	e.exec(`UPDATE river_job SET metadata = metadata || $2::jsonb WHERE id = $1`, job, "{"+strings.Join(waited, ", ")+"}")
}

// checkWaitsCarried checks that the replacement of job (setWaits) has
// the waits of carriedWaits and none of droppedWaits.
func (e *env) checkWaitsCarried(job int64) {
	e.t.Helper()
	var kept map[string]json.RawMessage
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT metadata FROM river_job WHERE (metadata->>'memoryd_replaces')::bigint = $1`,
		job).Scan(&kept); err != nil {
		e.t.Fatalf("replacement's metadata: %v", err)
	}
	for k, v := range carriedWaits {
		if got, ok := kept[k]; !ok || string(got) != v {
			e.t.Errorf("replacement's %s = %s (present: %v), want the job's %s", k, got, ok, v)
		}
	}
	for k := range droppedWaits {
		if v, ok := kept[k]; ok {
			e.t.Errorf("replacement's %s = %s, want none (it runs at once)", k, v)
		}
	}
}

// TestJobsOfDeadProcessTakenOver: extraction jobs left running by a process
// that stopped heartbeating are worked again at once, long before River's
// rescuer (2 × JobTimeout, 20 minutes with the defaults) would; a job on its
// last attempt fails its turn instead; the running job of a process whose
// heartbeat is fresh is left alone.
func TestJobsOfDeadProcessTakenOver(t *testing.T) {
	e := setup(t)
	jobs := e.recordTurns(recoverTurn("dead-1", "ann"), recoverTurn("dead-last", "ann"), recoverTurn("live-1", "bea"))
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES
		('crashed', now() - interval '1 hour'), ('busy', now() + interval '1 hour')`)
	running := `UPDATE river_job SET state = 'running', attempt = $2, max_attempts = 5, attempted_at = now(), attempted_by = ARRAY['x', $3] WHERE id = $1`
	e.exec(running, jobs["dead-1"], 1, "crashed")
	e.exec(running, jobs["dead-last"], 5, "crashed")
	e.exec(running, jobs["live-1"], 1, "busy")
	e.setWaits(jobs["dead-1"])

	e.start(extractor.NewRules(), nil) // default JobTimeout (10m) and process timeout
	e.waitFor("the dead process's turns settled", func() (bool, string) {
		a, b := e.turnStatus("dead-1"), e.turnStatus("dead-last")
		return a.Status == store.StatusProcessed && b.Status == store.StatusFailed, a.Status + "/" + b.Status
	})
	e.checkWaitsCarried(jobs["dead-1"])
	// One transaction took over both jobs of "crashed" and saw "busy".
	if got := e.turnStatus("dead-last").LastError; !strings.Contains(got, "discarded after 5 attempts") {
		t.Errorf("failed turn's reason = %q, want the discarded job named", got)
	}
	for _, id := range []string{"dead-1", "dead-last"} {
		if s := e.jobState(jobs[id]); s != "cancelled" {
			t.Errorf("job of %s is %s, want cancelled (ended, replaced by a new job)", id, s)
		}
	}
	if s, st := e.jobState(jobs["live-1"]), e.turnStatus("live-1").Status; s != "running" || st != store.StatusPending {
		t.Errorf("job of the live process is %s with its turn %s, want running and pending (untouched)", s, st)
	}
	var n int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM memoryd_processes WHERE id = 'crashed'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("dead process row left: %d, %v", n, err)
	}
	// The failed turn is listed and can be retried.
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "", 10, true); err != nil || n != 1 {
		t.Fatalf("retry failed = %d, %v; want 1", n, err)
	}
	e.waitFor("the retried turn processed", func() (bool, string) {
		s := e.turnStatus("dead-last").Status
		return s == store.StatusProcessed, s
	})
}

// TestTakeOverEndsTheBurstClaim: a debounced burst job of a dead process
// holds a claim on its conversation's turns; its replacement is a new job
// that could not take the claim back, so without the takeover ending the
// claim the burst waited a job timeout (10 minutes by default). With the
// defaults the burst is processed at once.
func TestTakeOverEndsTheBurstClaim(t *testing.T) {
	e := setup(t)
	burst := []store.Turn{recoverTurn("b-1", "dee"), recoverTurn("b-2", "dee")}
	for i := range burst {
		burst[i].ConversationID = "c1"
		burst[i].TurnAt = t0.Add(time.Duration(i) * time.Second)
	}
	jobs := e.recordTurns(burst...)
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	// b-1's job was running the burst (its conversation in its args) and
	// had claimed both turns; b-2's job had already found them claimed and
	// completed.
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, max_attempts = 5, attempted_at = now(), attempted_by = ARRAY['crashed'],
		args = args || '{"conversation_id":"c1"}' WHERE id = $1`, jobs["b-1"])
	e.exec(`DELETE FROM river_job WHERE id = $1`, jobs["b-2"])
	e.exec(`UPDATE turns SET claimed_until = now() + interval '10 minutes', claimed_by = $1 WHERE user_id = 'dee'`, jobs["b-1"])

	e.start(extractor.NewRules(), nil)
	e.waitFor("the burst of the dead process processed", func() (bool, string) {
		a, b := e.turnStatus("b-1"), e.turnStatus("b-2")
		return a.Status == store.StatusProcessed && b.Status == store.StatusProcessed, a.Status + "/" + b.Status
	})
}

// blockingExtractor blocks its first Extract until ctx ends and reports the
// cause; later calls extract with the rules.
type blockingExtractor struct {
	*extractor.Rules
	once    sync.Once
	entered chan struct{}
	ended   chan error
	// release, closed, ends the block with the rules' result (a nil
	// release blocks until ctx ends): a test closes it before the worker's
	// stop, which would otherwise wait out its deadline for the job.
	release chan struct{}
}

func (b *blockingExtractor) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	first := false
	b.once.Do(func() { first = true })
	if !first {
		return b.Rules.Extract(ctx, in)
	}
	close(b.entered)
	select {
	case <-ctx.Done():
	case <-b.release:
		return b.Rules.Extract(ctx, in)
	}
	b.ended <- context.Cause(ctx)
	return extractor.Result{}, ctx.Err()
}

// recv receives from ch, failing the test after a generous bound.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestProcessDeclaredDeadStopsItsJobs: a process that learns that another
// declared it dead (its row is gone, as after a takeover) cancels the jobs it
// is running, which would otherwise run beside their replacements, and then
// takes work again.
func TestProcessDeclaredDeadStopsItsJobs(t *testing.T) {
	e := setup(t)
	ext := &blockingExtractor{Rules: extractor.NewRules(), entered: make(chan struct{}), ended: make(chan error, 1)}
	e.start(ext, nil)
	e.publish(events.Turn{ID: "slow-1", UserID: "cy", UserMessage: "I live in Rome.", AssistantResponse: "Ok."})
	recv(t, ext.entered, "the extraction to start")
	e.exec(`DELETE FROM memoryd_processes`)
	cause := recv(t, ext.ended, "the running job to be cancelled") // its own timeout is 10 minutes away
	if !strings.Contains(fmt.Sprint(cause), "declared this one dead") {
		t.Errorf("job cancelled with %v, want the takeover named", cause)
	}
	if errors.Is(cause, context.DeadlineExceeded) {
		t.Fatal("job ended by its timeout, not by the lease")
	}
	e.waitFor("the turn processed after the job was handed back", func() (bool, string) {
		s := e.turnStatus("slow-1").Status
		return s == store.StatusProcessed, s
	})
}

// A document's chunking job running in a process that died is replaced with
// the attempts it had left, so the document becomes searchable: nothing
// else enqueues it again (before, it stayed pending for good).
func TestIndexJobOfDeadProcessTakenOver(t *testing.T) {
	e := setup(t)
	alice := store.Owner{User: "alice"}
	var doc strings.Builder
	for i := range 20 {
		fmt.Fprintf(&doc, "## Section %d\n\nThe narwhal note number %d.\n\n", i, i)
	}
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var job int64
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		r, err := q.PutDocument(e.ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "d", Content: doc.String()})
		if err != nil {
			return err
		}
		res, err := client.InsertTx(e.ctx, tx, worker.IndexDocumentArgs{CollectionID: r.Collection.ID, DocID: r.DocID, Hash: r.Hash}, &river.InsertOpts{MaxAttempts: 3})
		if err != nil {
			return err
		}
		job = res.Job.ID
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.takeOverAndWaitReady(job)
	if s := e.jobState(job); s != "cancelled" {
		t.Errorf("the dead process's job is %s, want cancelled", s)
	}
	var attempts int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT max_attempts FROM river_job
		WHERE kind = $1 AND (metadata->>'memoryd_replaces')::bigint = $2`, worker.IndexDocumentJobKind, job).Scan(&attempts); err != nil || attempts != 2 {
		t.Errorf("replacement job's attempts = %d (%v), want the 2 left", attempts, err)
	}
}

// TestEmbedJobOfDeadProcessTakenOver: an embed job left running by a
// process that died is replaced at once by a job with the attempts it had
// left, so its items get their vectors without waiting for the hourly
// sweep (off here), and with its waits so far, as an extraction job's
// replacement (before, a takeover restarted them); one on its last
// attempt is ended and not replaced.
func TestEmbedJobOfDeadProcessTakenOver(t *testing.T) {
	e := setup(t)
	ids, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "ann", Question: "My dog is named Rex.", CreatedAt: t0},
		{UserID: "ann", Question: "I live in Paris.", CreatedAt: t0},
		{UserID: "bea", Question: "I prefer tea.", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(args worker.EmbedArgs) int64 {
		res, err := client.Insert(e.ctx, args, &river.InsertOpts{MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	alive := insert(worker.EmbedArgs{UserID: "ann", ContextIDs: ids[:2], Model: "m1"})
	last := insert(worker.EmbedArgs{UserID: "bea", ContextIDs: ids[2:], Model: "m1"})
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	running := `UPDATE river_job SET state = 'running', attempt = $2, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = $1`
	e.exec(running, alive, 1)
	e.exec(running, last, 3)
	e.setWaits(alive)

	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitEmbedded("ann", "m1", 2)
	e.checkWaitsCarried(alive)
	for id, want := range map[int64]string{alive: "cancelled", last: "cancelled"} {
		if s := e.jobState(id); s != want {
			t.Errorf("job %d is %s, want %s", id, s, want)
		}
	}
	var reps []int
	rows, err := e.store.Pool().Query(e.ctx, `SELECT max_attempts FROM river_job
		WHERE kind = $1 AND metadata->>'memoryd_replaces' IS NOT NULL ORDER BY id`, worker.EmbedJobKind)
	if err != nil {
		t.Fatal(err)
	}
	reps, err = pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0] != 2 {
		t.Errorf("replacement embed jobs' attempts = %v, want one job with the 2 attempts left", reps)
	}
	if n, err := e.store.CountEmbeddings(e.ctx, "bea", "m1"); err != nil || n.Embedded != 0 {
		t.Errorf("bea's items, of a job ended on its last attempt, embedded %+v (%v); want none until a sweep", n, err)
	}
}

// Two running chunking jobs of one document and content in a dead process,
// one without a unique key (enqueued by an older memoryd during a rolling
// upgrade), are replaced once: the takeover's insert skips the second
// rather than failing on the unique key (and with it every takeover).
func TestIndexJobsOfOneDocumentTakenOverOnce(t *testing.T) {
	e := setup(t)
	alice := store.Owner{User: "alice"}
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []int64
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		r, err := q.PutDocument(e.ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "d", Content: "# A\n\nThe narwhal note.\n"})
		if err != nil {
			return err
		}
		args := worker.IndexDocumentArgs{CollectionID: r.Collection.ID, DocID: r.DocID, Hash: r.Hash}
		for i := range 2 {
			res, err := client.InsertTx(e.ctx, tx, args, &river.InsertOpts{MaxAttempts: 3})
			if err != nil {
				return err
			}
			jobs = append(jobs, res.Job.ID)
			if i == 0 {
				// The older memoryd's job has no unique key; the second,
				// this memoryd's, keeps its own.
				if _, err := tx.Exec(e.ctx, `UPDATE river_job SET unique_key = NULL, unique_states = NULL WHERE id = $1`, res.Job.ID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.takeOverAndWaitReady(jobs...)
	var reps int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND metadata ? 'memoryd_replaces'`,
		worker.IndexDocumentJobKind).Scan(&reps); err != nil || reps != 1 {
		t.Errorf("replacement jobs: %d (%v), want 1", reps, err)
	}
}

// A pending document put again while its chunking job waits gets that job,
// not a second one; new content gets its own.
func TestIndexJobOncePerContent(t *testing.T) {
	e := setup(t)
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(hash string) int64 {
		t.Helper()
		var id int64
		if err := e.store.InTx(e.ctx, func(tx pgx.Tx, _ *store.Store) (err error) {
			id, err = w.EnqueueIndexDocument(e.ctx, tx, 1, "d", hash)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first, again, other := enqueue("h1"), enqueue("h1"), enqueue("h2")
	if first == 0 || again != first || other == first {
		t.Fatalf("job ids: first %d, again %d, new content %d; want the first twice, then another", first, again, other)
	}
}

// takeOverAndWaitReady marks jobs as running in a process that died
// ("crashed", its heartbeat an hour old), starts a worker, and waits until
// alice's document in collection "big" is chunked.
func (e *env) takeOverAndWaitReady(jobs ...int64) {
	e.t.Helper()
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = ANY($1)`, jobs)
	e.start(extractor.NewRules(), nil)
	e.waitFor("the document chunked after the takeover", func() (bool, string) {
		docs, _, err := e.store.ListDocuments(e.ctx, store.Owner{User: "alice"}, "big", "", 1)
		if err != nil || len(docs) != 1 {
			return false, fmt.Sprint(docs, err)
		}
		return docs[0].Status == store.DocReady, docs[0].Status
	})
}

// TestStopPastItsDeadlineLeavesTheTakeoverToOthers: a Stop already past
// its deadline marks its process dead and returns; it does not take over
// the jobs of dead processes, whose transaction can wait on the turns
// table (a reviewer saw a 5 s stop take 10 s with that table locked).
// The next process to start, or any other's heartbeat, takes them over.
func TestStopPastItsDeadlineLeavesTheTakeoverToOthers(t *testing.T) {
	e := setup(t)
	// The job is running in a live process when the worker starts (so
	// neither its start's takeover nor its fetch touches it), and that
	// process dies while the worker runs with no heartbeat of its own:
	// only Stop could take the job over.
	jobs := e.recordTurns(recoverTurn("dead-1", "ann"))
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now())`)
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, max_attempts = 5, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = $1`, jobs["dead-1"])
	w, _ := e.startWorker(extractor.NewRules(), func(c *worker.Config) {
		c.HeartbeatInterval, c.ProcessTimeout = time.Hour, 2*time.Hour
	})
	e.exec(`UPDATE memoryd_processes SET heartbeat_at = '-infinity' WHERE id = 'crashed'`)
	late, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := w.Stop(late); err != nil {
		t.Fatal(err)
	}
	if s := e.jobState(jobs["dead-1"]); s != "running" {
		t.Fatalf("the dead process's job is %s after a Stop past its deadline, want running (left to the next process)", s)
	}
	var alive int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM memoryd_processes WHERE heartbeat_at > '-infinity'`).Scan(&alive); err != nil || alive != 0 {
		t.Fatalf("%d processes still alive after Stop (%v), want the stopped one marked dead", alive, err)
	}
	e.start(extractor.NewRules(), nil)
	e.waitFor("the job taken over and its turn processed by the next process", func() (bool, string) {
		s := e.turnStatus("dead-1").Status
		return s == store.StatusProcessed, s
	})
}

// TestJobsWhoseFetchWasLostTakenOver: a job River marks running in a live
// process that never received it (a Postgres connection cut after the
// fetch committed: "producer: Error fetching jobs ... unexpected EOF") is
// worked again within a heartbeat once it is lostAfter old, with the
// attempt the fetch counted given back; before, it waited for River's
// rescuer, 2 × JobTimeout (20 minutes by default), and spent an attempt.
// A job the process does run, however long, is left alone.
func TestJobsWhoseFetchWasLostTakenOver(t *testing.T) {
	e := setup(t)
	jobs := e.recordTurns(recoverTurn("lost-1", "ann"), recoverTurn("slow-1", "bea"))
	// Out of reach of the worker's fetch until staged.
	e.exec(`UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour' WHERE id = $1`, jobs["lost-1"])
	ext := &blockingExtractor{Rules: extractor.NewRules(), entered: make(chan struct{}), ended: make(chan error, 1), release: make(chan struct{})}
	e.start(ext, nil)                        // default JobTimeout (10m): the rescuer would take 20 minutes
	t.Cleanup(func() { close(ext.release) }) // before the worker's stop (cleanups run last first)
	<-ext.entered                            // slow-1's job runs, blocked
	var process string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT id FROM memoryd_processes`).Scan(&process); err != nil {
		t.Fatal(err)
	}
	// Both fetched two minutes ago by this process: slow-1's it runs,
	// lost-1's it never received.
	e.exec(`UPDATE river_job SET attempted_at = now() - interval '2 minutes' WHERE id = $1`, jobs["slow-1"])
	e.exec(`UPDATE river_job SET state = 'running', attempt = 2, max_attempts = 2, attempted_at = now() - interval '2 minutes',
		attempted_by = ARRAY[$2::text] WHERE id = $1`, jobs["lost-1"], process)
	e.waitFor("the lost job's turn processed", func() (bool, string) {
		s := e.turnStatus("lost-1").Status
		return s == store.StatusProcessed, s
	})
	if s := e.jobState(jobs["lost-1"]); s != "cancelled" {
		t.Errorf("lost job is %s, want cancelled (ended, replaced by a new job)", s)
	}
	// Fetched on its last attempt, never run: its replacement had that
	// attempt (a job on its last attempt would have failed its turn).
	var maxAttempts int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT max_attempts FROM river_job WHERE (metadata->>'memoryd_replaces')::bigint = $1`,
		jobs["lost-1"]).Scan(&maxAttempts); err != nil || maxAttempts != 1 {
		t.Errorf("replacement's max_attempts = %d, %v; want 1 (the attempt the lost fetch counted)", maxAttempts, err)
	}
	// The same pass saw slow-1's job, which this process runs.
	if s := e.jobState(jobs["slow-1"]); s != "running" {
		t.Errorf("the job the process runs is %s, want running (untouched)", s)
	}
	select {
	case err := <-ext.ended:
		t.Errorf("the running job's extraction was ended: %v", err)
	default:
	}
}

// TestJobOfDeadProcessRunsTheWorkersAttempts: a job that runs the
// worker's attempts (retry-failed's from a process without workers:
// River's row says 25) left running by a dead process is taken over on
// the worker's count: on the worker's last attempt its turn fails for
// good and the job ends cancelled; before it, its replacement has the
// worker's attempts left, and extracts the turn.
func TestJobOfDeadProcessRunsTheWorkersAttempts(t *testing.T) {
	e := setup(t)
	jobs := e.recordTurns(recoverTurn("dead-first", "ann"), recoverTurn("dead-last", "ann"))
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	running := `UPDATE river_job SET state = 'running', attempt = $2, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = $1`
	e.exec(running, jobs["dead-first"], 1)
	e.exec(running, jobs["dead-last"], 2)

	e.start(extractor.NewRules(), func(c *worker.Config) { c.MaxAttempts = 2 })
	e.waitFor("the dead process's turns settled", func() (bool, string) {
		a, b := e.turnStatus("dead-first"), e.turnStatus("dead-last")
		return a.Status == store.StatusProcessed && b.Status == store.StatusFailed, a.Status + "/" + b.Status
	})
	if got := e.turnStatus("dead-last").LastError; !strings.Contains(got, "discarded after 2 attempts") {
		t.Errorf("failed turn's reason = %q, want the discarded job named", got)
	}
	for id, j := range jobs {
		var maxAttempts int
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT max_attempts FROM river_job WHERE id = $1`, j).Scan(&maxAttempts); err != nil || maxAttempts != 25 {
			t.Fatalf("job of %s carries max_attempts %d, %v; this test needs River's default", id, maxAttempts, err)
		}
		if s := e.jobState(j); s != "cancelled" {
			t.Errorf("job of %s is %s, want cancelled", id, s)
		}
	}
	var reps []int
	rows, err := e.store.Pool().Query(e.ctx, `SELECT max_attempts FROM river_job WHERE metadata ? 'memoryd_replaces'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		reps = append(reps, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || reps[0] != 1 {
		t.Errorf("replacements' max_attempts %v, want one, of 1 (the worker's 2 less the one spent)", reps)
	}
}
