package worker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestCrashRequeueAfterAForgetGivesNoJobs: a job of several turns whose
// last attempt the model server's crash ends gives the turns it left
// unsent a job of their own (requeue); when the user is forgotten while
// the crashing request is in flight, those turns are gone and get none:
// the forget committed before the requeue (committed), or it had deleted
// her turns and made its second pass over her jobs and not committed yet
// (under way: the requeue waits for the turns it holds). Before, the
// requeue inserted a job naming the forgotten user's event ids after her
// forget in both.
func TestCrashRequeueAfterAForgetGivesNoJobs(t *testing.T) {
	t.Run("committed", func(t *testing.T) { crashRequeueBesideAForget(t, false) })
	t.Run("under way", func(t *testing.T) { crashRequeueBesideAForget(t, true) })
}

// crashRequeueBesideAForget is TestCrashRequeueAfterAForgetGivesNoJobs,
// the forget held past its second pass over the jobs (at its delete of
// the user's usage) until the requeue has either inserted its job or
// waits for it, with underWay.
func crashRequeueBesideAForget(t *testing.T, underWay bool) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, 200*time.Millisecond)
	var hold *blocker
	if underWay {
		e.exec(`INSERT INTO llm_usage (user_id, model, prompt_tokens, completion_tokens, extractions) VALUES ('u', 'fake', 1, 1, 1)`)
		hold = e.block(`SELECT FROM llm_usage WHERE user_id = 'u' FOR UPDATE`)
	}
	forgot := make(chan error, 1)
	forgetting := make(chan int, 1) // the forget's backend, held
	srv.beforeCrash = func() {
		if !underWay {
			// Forgotten, committed, while the poison request is in flight.
			_, _, err := e.store.ForgetUser(e.ctx, "u", events.UserToken("u"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs)
			forgot <- err
			return
		}
		go func() {
			_, _, err := e.store.ForgetUser(e.ctx, "u", events.UserToken("u"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs)
			forgot <- err
		}()
		forgetting <- e.waitBlocked("the forget to wait at its delete of the user's usage", hold.pid)
	}
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns(marker, "r", 3, 1, "")
	insertJobOf(t, e, turns, ids)
	// One attempt: the first crash ends the job, and r2, unsent, is
	// requeued.
	stop := e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	if underWay {
		var forget int
		select {
		case forget = <-forgetting:
		case <-time.After(time.Minute):
			t.Fatal("the poison request was not sent within a minute")
		}
		// The requeue inserted its job, or waits for the turns the
		// forget holds; then the forget goes on.
		e.waitFor("the requeue's job inserted, or its wait for the forget", func() (bool, string) {
			var jobs, waiting int
			err := e.watcher().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'user_id' = 'u'),
				(SELECT count(*) FROM pg_stat_activity WHERE $2::int = ANY(pg_blocking_pids(pid)))`, worker.ExtractJobKind, forget).Scan(&jobs, &waiting)
			return err == nil && (jobs > 0 || waiting > 0), fmt.Sprint(jobs, " jobs, ", waiting, " waiting, ", err)
		})
		if err := hold.tx.Rollback(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitForgot(t, forgot)
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
