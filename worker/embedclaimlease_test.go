package worker_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// insertEmbedJob inserts an embed job of model for user's items ids.
func (e *env) insertEmbedJob(user, model string, ids []int64) int64 {
	e.t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := client.Insert(e.ctx, worker.EmbedArgs{UserID: user, ContextIDs: ids, Model: model},
		&river.InsertOpts{Queue: worker.QueueEmbedFor(model), MaxAttempts: 5})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.Job.ID
}

// claimedJobs counts the jobs the queue-depth gauge reports as claimed,
// over every queue.
func (e *env) claimedJobs() int64 {
	e.t.Helper()
	depth, err := e.store.QueueDepth(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var n int64
	for k, c := range depth {
		if k[1] == store.ClaimedState {
			n += c
		}
	}
	return n
}

// A job whose claim's lease ended (its claimer stalled, or died with no
// process left to take over) and that River then runs is no longer
// claimed: once its run ends (here snoozed by a 503), it neither reads as
// claimed in the queue-depth gauge nor can the old claimer's late finish
// complete it. Before, it kept the old claimer's id.
func TestEmbedJobRunAfterItsLeaseIsNoLongerClaimed(t *testing.T) {
	e := setup(t)
	ids, err := e.store.InsertContext(e.ctx, []store.ContextWrite{{UserID: "ann", Question: "My dog is named Rex.", CreatedAt: t0}})
	if err != nil {
		t.Fatal(err)
	}
	const staleClaimer = 987654
	job := e.insertEmbedJob("ann", "m1", ids)
	// As River's scheduler leaves it when the lease ends: available, the
	// claimer still named.
	e.exec(`UPDATE river_job SET metadata = metadata || jsonb_build_object($2::text, $3::bigint) WHERE id = $1`,
		job, store.ClaimedByKey, staleClaimer)

	srv := embeddingtest.New(t)
	srv.Fail(http.StatusServiceUnavailable, "60")
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitFor("the job ran once and waits", func() (bool, string) {
		var state string
		var ran bool
		err := e.store.Pool().QueryRow(e.ctx, `SELECT state::text, attempted_at IS NOT NULL FROM river_job WHERE id = $1`, job).Scan(&state, &ran)
		return err == nil && ran && (state == "scheduled" || state == "retryable"), fmt.Sprint(state, ran, err)
	})
	var claimedBy *string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT metadata->>$2::text FROM river_job WHERE id = $1`, job, store.ClaimedByKey).Scan(&claimedBy); err != nil {
		t.Fatal(err)
	}
	if claimedBy != nil {
		t.Errorf("after River ran it, the job still names claimer %s", *claimedBy)
	}
	if n := e.claimedJobs(); n != 0 {
		t.Errorf("the queue-depth gauge counts %d claimed jobs, want 0", n)
	}
	if n, err := e.store.FinishClaimed(e.ctx, staleClaimer, []int64{job}); err != nil || n != 0 {
		t.Errorf("the old claimer's late finish completed %d (%v), want 0", n, err)
	}
	if s := e.jobState(job); s == "completed" {
		t.Errorf("the job completed with no vector saved")
	}
}

// An embed job that died with its process while holding claims is
// replaced by a job that runs alone, like the jobs it had claimed: its
// texts or theirs may be what stopped the process, so neither takes other
// jobs' texts into a request again. Before, the replacement claimed anew.
func TestEmbedClaimerOfDeadProcessReplacedToRunAlone(t *testing.T) {
	e := setup(t)
	ids, err := e.store.InsertContext(e.ctx, []store.ContextWrite{
		{UserID: "ann", Question: "My dog is named Rex.", CreatedAt: t0},
		{UserID: "bea", Question: "I prefer tea.", CreatedAt: t0},
		{UserID: "cid", Question: "I live in Oslo.", CreatedAt: t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	claimer := e.insertEmbedJob("ann", "m1", ids[:1])
	claimed := e.insertEmbedJob("bea", "m1", ids[1:2])
	e.insertEmbedJob("cid", "m1", ids[2:]) // one the replacement could claim
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = $1`, claimer)
	e.exec(`UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 hour',
		metadata = metadata || jsonb_build_object($2::text, $3::bigint) WHERE id = $1`, claimed, store.ClaimedByKey, claimer)

	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	for _, u := range []string{"ann", "bea", "cid"} {
		e.waitEmbedded(u, "m1", 1)
	}
	var replacement int64
	var alone bool
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT id, metadata ? $3::text FROM river_job
		WHERE kind = $1 AND (metadata->>'memoryd_replaces')::bigint = $2`, worker.EmbedJobKind, claimer, store.UnclaimableKey).Scan(&replacement, &alone); err != nil {
		t.Fatalf("the claimer's replacement: %v", err)
	}
	if !alone {
		t.Errorf("the replacement of a claimer that died holding claims is not marked to run alone")
	}
	for _, in := range srv.Sent() {
		if len(in) > 1 {
			t.Errorf("a request of %d texts %q: the replacement or its released claim was batched", len(in), in)
		}
	}
}
