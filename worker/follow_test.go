package worker_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// liveProcess records a running worker process that embeds with model,
// its heartbeat an hour ahead so that it stays live for the whole test
// without a loop renewing it.
func (e *env) liveProcess(id, model string) {
	e.t.Helper()
	if err := e.store.RegisterProcess(e.ctx, id, store.ProcessRecord{EmbedModel: model}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Pool().Exec(e.ctx, `UPDATE memoryd_processes SET heartbeat_at = now() + interval '1 hour' WHERE id = $1`, id); err != nil {
		e.t.Fatal(err)
	}
}

// embedJob is an embed job's model, user and items, and what enqueued it.
type embedJob struct {
	Model, User, Items, Source string
}

// embedJobArgs lists the embed jobs.
func (e *env) embedJobArgs() []embedJob {
	e.t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT args->>'model', args->>'user_id', (args->'context_ids')::text, metadata->>'memoryd_source'
		FROM river_job WHERE kind = $1 ORDER BY id`, worker.EmbedJobKind)
	if err != nil {
		e.t.Fatal(err)
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[embedJob])
	if err != nil {
		e.t.Fatal(err)
	}
	return jobs
}

// TestWorkerWithoutEmbedderEnqueuesTheRunningModel: a worker started
// without an embedder (a replay's, or a serve's without --embed-base-url)
// beside workers that embed gives the items it extracts embed jobs of
// their model, and a worker of that model embeds them. Before, the items
// got no job, and were found by keywords only until the next hourly sweep
// (a race hunt: 29 to 276 items of a replayed user). An enrich serve's
// record (worker.Presence) runs no embed job, so its model is not taken.
func TestWorkerWithoutEmbedderEnqueuesTheRunningModel(t *testing.T) {
	e := setup(t)
	e.liveProcess("serve-1", "m1")
	e.liveProcess("enrich-0123456789abcdef", "m-enrich") // started later, yet runs no job
	e.start(extractor.NewRules(), func(c *worker.Config) { c.EmbedSweepInterval = -1 })
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Rex is a fine name."})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Lovely city."})
	e.waitDone(2)
	items, err := e.store.RecentContext(e.ctx, "alice", 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("alice's items: %d (%v), want 2", len(items), err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, fmt.Sprint(it.ID))
	}
	slices.Sort(ids)
	// One job a turn, written in the extraction's transaction.
	jobs := e.embedJobArgs()
	var named []string
	for _, j := range jobs {
		if j.Model != "m1" || j.User != "alice" || j.Source != "embed_write" {
			t.Errorf("job %+v: want model m1, user alice, enqueued by the write", j)
		}
		named = append(named, j.Items)
	}
	slices.Sort(named)
	if len(jobs) != 2 || !slices.Equal(named, []string{"[" + ids[0] + "]", "[" + ids[1] + "]"}) {
		t.Fatalf("embed jobs %+v; want one of m1 for each of alice's items %v", jobs, ids)
	}
	// A worker of m1 takes them.
	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), -1)(c)
		c.DisableIngest = true
	})
	e.waitEmbedded("alice", "m1", 2)
	e.checkVectors("alice", "m1", embeddingtest.DefaultDims)
}

// TestWorkerOfOneModelEnqueuesTheOtherRunningModel: in a fleet of two
// models (a model change rolling out), the items a worker of one model
// writes get embed jobs of the other running model too, so that its serves
// find them by meaning as well. Before, each item got only its writer's
// model's job, and the other model's serves answered without its vector
// until the hourly sweep (a walk: 492 items without one after 2.5 minutes,
// and the same request answered differently by the two serves).
func TestWorkerOfOneModelEnqueuesTheOtherRunningModel(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	// A worker of m3 (jobs only), then one of m1 that ingests.
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m3"), -1)(c)
		c.DisableIngest = true
	})
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Rex is a fine name."})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", AssistantResponse: "Lovely city."})
	e.waitDone(2)
	e.waitEmbedded("alice", "m1", 2)
	items, err := e.store.RecentContext(e.ctx, "alice", 10)
	if err != nil || len(items) != 2 {
		t.Fatalf("alice's items: %d (%v), want 2", len(items), err)
	}
	perModel := map[string][]string{}
	for _, j := range e.embedJobArgs() {
		perModel[j.Model] = append(perModel[j.Model], j.Items)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, fmt.Sprintf("[%d]", it.ID))
	}
	slices.Sort(ids)
	for _, m := range []string{"m1", "m3"} {
		slices.Sort(perModel[m])
		if !slices.Equal(perModel[m], ids) {
			t.Errorf("embed jobs of %s name %v, want one for each of alice's items %v", m, perModel[m], ids)
		}
	}
	// Each model's worker embeds its model's, none attempted by the other
	// (each model has its queue).
	e.waitEmbedded("alice", "m3", 2)
	var wasted int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND (attempt > 1 OR state IN ('retryable', 'discarded', 'cancelled'))`, worker.EmbedJobKind).Scan(&wasted); err != nil || wasted != 0 {
		t.Errorf("%d embed jobs retried or given up (%v), want 0", wasted, err)
	}
}

// TestWorkerWithoutEmbedderAndNoneRunning: with no running worker that
// embeds, a worker without an embedder enqueues no embed job (nothing
// would take it; the sweep of the first that starts finds the items).
func TestWorkerWithoutEmbedderAndNoneRunning(t *testing.T) {
	e := setup(t)
	e.liveProcess("enrich-0123456789abcdef", "m1") // an enrich serve only
	if err := e.store.RegisterProcess(e.ctx, "gone", store.ProcessRecord{EmbedModel: "m2"}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.EndProcess(e.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	e.start(extractor.NewRules(), func(c *worker.Config) { c.EmbedSweepInterval = -1 })
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "My dog is named Rex.", AssistantResponse: "Rex is a fine name."})
	e.waitDone(1)
	if jobs := e.embedJobArgs(); len(jobs) != 0 {
		t.Fatalf("embed jobs %v, want none", jobs)
	}
}

// TestEmbedSweepOnAWorkerWithoutEmbedder: the sweep runs on River's
// leader, whatever it embeds with: a leader without an embedder (or with
// the other model of a rolling change) enqueues the missing vectors of
// every model a running worker embeds with. Before, only an embedding
// process had the sweep, for its own model, so a leader without one swept
// nothing.
func TestEmbedSweepOnAWorkerWithoutEmbedder(t *testing.T) {
	e := setup(t)
	e.seedItems("alice")
	e.liveProcess("serve-1", "m1")
	e.liveProcess("serve-2", "m2")
	e.start(extractor.NewRules(), nil) // the sweep's default: hourly and at start
	e.waitFor("the sweep's jobs", func() (bool, string) {
		jobs := e.embedJobArgs()
		return len(jobs) == 2, fmt.Sprint(jobs)
	})
	models := map[string]int{}
	for _, j := range e.embedJobArgs() {
		if j.User != "alice" || j.Source != "embed_sweep" || j.Items != ids(t, e, "alice") {
			t.Errorf("job %+v: want alice's two items, enqueued by the sweep", j)
		}
		models[j.Model]++
	}
	if models["m1"] != 1 || models["m2"] != 1 {
		t.Errorf("sweep jobs by model %v, want one of m1 and one of m2", models)
	}
}

// ids is user's items' ids, as a JSON list.
func ids(t *testing.T, e *env, user string) string {
	t.Helper()
	var list string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT jsonb_agg(id ORDER BY id)::text FROM context WHERE user_id = $1`, user).Scan(&list); err != nil {
		t.Fatal(err)
	}
	return list
}

// TestEmbeddingWorkerSweepsAtStartWhenNotLeader: a worker that embeds and
// starts beside River's leader (which alone runs the periodic sweep at
// start) sweeps for its model once itself, so that items written while no
// worker of its model ran (by another model's, or none) get its jobs now
// rather than at the leader's next hourly sweep.
func TestEmbeddingWorkerSweepsAtStartWhenNotLeader(t *testing.T) {
	e := setup(t)
	e.seedItems("alice")
	e.start(extractor.NewRules(), nil)
	// It leads, and its sweep at start has run (finding no worker that
	// embeds, it enqueued nothing).
	e.waitFor("the first worker to lead and sweep", func() (bool, string) {
		var leads, swept bool
		err := e.store.Pool().QueryRow(e.ctx, `SELECT EXISTS (SELECT FROM river_leader l JOIN memoryd_processes p ON p.id = l.leader_id),
			EXISTS (SELECT FROM river_job WHERE kind = $1 AND state = 'completed')`, worker.EmbedSweepJobKind).Scan(&leads, &swept)
		return err == nil && leads && swept, fmt.Sprint(leads, swept, err)
	})
	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), func(c *worker.Config) {
		withEmbedder(embedder(t, srv, "m1"), time.Hour)(c)
		c.DisableIngest = true
	})
	e.waitEmbedded("alice", "m1", 2)
}

// After a model change, the jobs of a model no process embeds with any
// more are deleted by the embed sweep: before, they waited forever on
// their model's queue, which no process works (found by an outside-in
// audit: 22 jobs of m1 and 3 of m2 left "available" after m1 → m2 → m3,
// in the queue gauge for good). A model a live process records keeps its
// jobs, and so does a job younger than the process timeout (its process
// may be registering).
func TestEmbedSweepDeletesJobsOfModelsNoProcessUses(t *testing.T) {
	e := setup(t)
	e.seedItems("alice")
	e.liveProcess("serve-m1", "m1")
	ids := map[string]int64{}
	for _, j := range []struct {
		name, model, age string
	}{
		{"gone", "gone", "1 day"},
		{"gone, just inserted", "gone", "-1 hour"},
		{"live model", "m1", "1 day"},
	} {
		var id int64
		if err := e.store.Pool().QueryRow(e.ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, created_at, scheduled_at)
			VALUES ($1, jsonb_build_object('user_id', 'alice', 'context_ids', '[]'::jsonb, 'model', $2::text), $3, 'available', 5,
			        now() - $4::interval, now() + interval '1 hour') RETURNING id`,
			worker.EmbedJobKind, j.model, worker.QueueEmbedFor(j.model), j.age).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids[j.name] = id
	}
	e.start(extractor.NewRules(), nil) // the sweep runs at start
	exists := func(id int64) bool {
		var ok bool
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT EXISTS (SELECT FROM river_job WHERE id = $1)`, id).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	e.waitFor("the gone model's old job deleted", func() (bool, string) {
		return !exists(ids["gone"]), ""
	})
	for _, name := range []string{"gone, just inserted", "live model"} {
		if !exists(ids[name]) {
			t.Errorf("job %q was deleted", name)
		}
	}
}

// The sweep (and a backfill) leaves out the items a waiting or running
// job of the model already holds: after a restart the start sweep made
// jobs for items whose writes' jobs were still waiting, and two jobs sent
// the same texts (found by an outside-in audit: 20 of 239 texts sent
// twice after a restart, 26-33 beside a backfill; a paid API bills both).
// An item whose job gave up is enqueued again; so is one queued for
// another model only.
func TestEmbedSweepLeavesOutItemsAlreadyQueued(t *testing.T) {
	e := setup(t)
	e.seedItems("alice", "bob", "cid")
	item := func(user string) []int64 {
		var ids []int64
		rows, err := e.store.Pool().Query(e.ctx, `SELECT id FROM context WHERE user_id = $1 ORDER BY id`, user)
		if err != nil {
			t.Fatal(err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// alice: both items held by waiting jobs of m1 (a write's, one item
	// each); bob: one item held by a job that gave up; cid: both items
	// held by a job of m2 only.
	a, b, c := item("alice"), item("bob"), item("cid")
	e.insertEmbedJob("alice", "m1", a[:1])
	e.insertEmbedJob("alice", "m1", a[1:])
	gaveUp := e.insertEmbedJob("bob", "m1", b[:1])
	e.exec(`UPDATE river_job SET state = 'discarded', finalized_at = now() WHERE id = $1`, gaveUp)
	e.insertEmbedJob("cid", "m2", c)
	enq, err := worker.NewEnqueuer(worker.EnqueuerConfig{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	// Every item lacking a vector is found (a backfill waits for them
	// all), alice's left to her jobs.
	if n, err := enq.EnqueueMissingEmbeddings(e.ctx, "", "m1", 64, 5); err != nil || n != 6 {
		t.Fatalf("the sweep found %d items (%v), want the 6", n, err)
	}
	var aliceJobs int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'user_id' = 'alice'`, worker.EmbedJobKind).Scan(&aliceJobs); err != nil {
		t.Fatal(err)
	}
	if aliceJobs != 2 {
		t.Errorf("alice has %d embed jobs, want her writes' 2 alone", aliceJobs)
	}
	var others int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'model' = 'm1' AND args->>'user_id' IN ('bob', 'cid')
		AND state = 'available'`, worker.EmbedJobKind).Scan(&others); err != nil {
		t.Fatal(err)
	}
	if others != 2 {
		t.Errorf("bob and cid have %d new m1 jobs, want one each", others)
	}
}
