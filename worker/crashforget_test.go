package worker_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestCrashRequeueAfterAForgetGivesNoJobs: a job of several turns whose
// last attempt the model server's crash ends gives the turns it left
// unsent a job of their own (requeue); when the user was forgotten while
// the crashing request was in flight, those turns are gone and get none.
// Before, the requeue inserted a job naming the forgotten user's event
// ids after her forget.
func TestCrashRequeueAfterAForgetGivesNoJobs(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, 200*time.Millisecond)
	forgot := make(chan error, 1)
	srv.beforeCrash = func() {
		// Forgotten, committed, while the poison request is in flight.
		_, _, err := e.store.ForgetUser(e.ctx, "u", events.UserToken("u"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs)
		forgot <- err
	}
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns(marker, "r", 3, 1, "")
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, turns); err != nil {
			return err
		}
		_, err := client.InsertTx(e.ctx, tx, worker.ExtractArgs{UserID: "u", EventIDs: ids}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// One attempt: the first crash ends the job, and r2, unsent, is
	// requeued.
	stop := e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	select {
	case err := <-forgot:
		if err != nil {
			t.Fatalf("forget: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the poison request was not sent within a minute")
	}
	stop() // the job's run, its requeue included, has ended
	if n, a := srv.poisonSent.Load(), srv.answered.Load(); n != 1 || a != 1 {
		t.Fatalf("poison requests %d, answered %d; want r1's crash after r0's answer: the ordering was not reached", n, a)
	}
	var jobs []string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(args->>'event_ids' ORDER BY id), '{}') FROM river_job
		WHERE kind = $1 AND args->>'user_id' = 'u'`, worker.ExtractJobKind).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("jobs naming the forgotten user after a crash ended her job during her forget: %v; want none", jobs)
	}
}
