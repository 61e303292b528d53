package worker_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// TestPoisonTurnCrashLoopAcrossServes: with two serves (workers with a
// store and a model client of their own, on one schema, as two processes
// are) and one model server, the crash of a poison turn's request cuts
// requests of both; each serve sends its cut requests again alone, and
// the poison turn fails after the server went down with it twice while
// every other turn is processed: a request sent alone is alone across the
// serves, not only in its own. Before, each serve sent its own alone
// beside the other's, an innocent turn of one was in flight when the
// other's poison turn crashed the server again, and it failed for good
// for a crash not its own.
func TestPoisonTurnCrashLoopAcrossServes(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, 200*time.Millisecond)
	const procs, slots = 2, 4
	// Long enough for the requests sent alone again to overlap across
	// the serves unless kept apart.
	srv.answerIn = 500 * time.Millisecond
	// The first requests, one short of both serves' slots, are held
	// until the poison turn's crash, so that it cuts requests of both
	// however slowly jobs start: at load 25, requests were answered before
	// others began, the 8 were never in flight at once (a CI run beside
	// helpers), and the crash could cut none. The slot left free runs the
	// other turns, one at a time, then the poison turn.
	srv.gate = make(chan struct{})
	srv.holdFirst = procs*slots - 1
	opened := false
	open := func() {
		if !opened {
			opened = true
			close(srv.gate)
		}
	}
	t.Cleanup(open)
	url := storetest.URL(t, e.store)
	for p := range procs {
		llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", MaxConcurrency: slots})
		if err != nil {
			t.Fatal(err)
		}
		s := e.store
		if p > 0 {
			s = storetest.Unmigrated(t, url) // migrated: another serve's pool on the schema
		}
		e.start(llm, func(c *worker.Config) {
			c.Store = s
			c.Workers = slots
			c.MaxAttempts = 5
			c.JobRetryBase = 500 * time.Millisecond
		})
	}
	const good = 4 * procs * slots
	for i := range good {
		e.publish(events.Turn{ID: fmt.Sprint("t", i), UserID: fmt.Sprint("user-", i), UserMessage: fmt.Sprintf("My name is Alice and I have %d cats.", i)})
	}
	// The poison turn comes while both serves have requests in flight,
	// which its crash cuts.
	e.waitFor("both serves' requests in flight", func() (bool, string) {
		n := srv.inFlight.Load()
		return n >= procs*slots-1, fmt.Sprint(n, " in flight")
	})
	e.publish(events.Turn{ID: "poison", UserID: "user-poisoned", UserMessage: "My name is Alice. " + marker})
	e.waitFor("the poison turn's crash", func() (bool, string) {
		n := srv.poisonSent.Load()
		return n >= 1, fmt.Sprint(n, " poison requests")
	})
	open()
	e.waitDone(good + 1)
	for i := range good {
		turn, err := e.store.GetTurn(e.ctx, fmt.Sprint("user-", i), fmt.Sprint("t", i))
		if err != nil {
			t.Fatal(err)
		}
		if turn.Status != "processed" {
			t.Errorf("good turn %s/%s %s: %s", turn.UserID, turn.EventID, turn.Status, turn.LastError)
		}
	}
	poison, err := e.store.GetTurn(e.ctx, "user-poisoned", "poison")
	if err != nil {
		t.Fatal(err)
	}
	if poison.Status != "failed" || !strings.HasPrefix(poison.LastError, worker.CrashedReason+" 2 times") {
		t.Errorf("poison turn %s: %q; want failed for its crashes", poison.Status, poison.LastError)
	}
	if n := srv.poisonSent.Load(); n != 2 {
		t.Errorf("poison turn sent %d times, each a crash; want 2", n)
	}
	if n := srv.cut.Load(); n < procs*slots-1 {
		t.Errorf("the crashes cut %d requests; want at least the %d held in flight", n, procs*slots-1)
	}
	t.Logf("requests cut by the crashes: %d, answered: %d", srv.cut.Load(), srv.answered.Load())
}

// TestAloneWaiterWokenWhenTheLockIsLetGo: of two turns the model server
// went down with, each to be sent again alone, the one held back while the
// other's request is in flight runs as soon as that request ends, woken
// by the job letting the lock go, not when its snooze (doubling while it
// waits) ends. Before, the lock sat idle while the waiter's snooze ran
// out: up to 10 s a wait.
func TestAloneWaiterWokenWhenTheLockIsLetGo(t *testing.T) {
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	srv := newCrashingServer(t, marker, 200*time.Millisecond)
	srv.crashLimit = 1 // the poison turn's second request is answered
	srv.gate = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(srv.gate)
		}
	}
	t.Cleanup(release)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", MaxConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) {
		c.Workers = 4
		c.MaxAttempts = 5
		c.JobRetryBase = 500 * time.Millisecond
	})
	e.publish(events.Turn{ID: "innocent", UserID: "user-a", UserMessage: "My name is Alice and I have 2 cats."})
	e.waitFor("the innocent turn's request in flight", func() (bool, string) {
		n := srv.inFlight.Load()
		return n == 1, fmt.Sprint(n, " in flight")
	})
	e.publish(events.Turn{ID: "poison", UserID: "user-p", UserMessage: "My name is Alice. " + marker})
	// Both were cut; one is sent again alone and held at the server, the
	// other waits for the lock, snoozed each time it finds it taken. Its
	// snooze is pushed an hour out, in the statement that finds it (a job
	// back from its snooze in between is not matched), so that within the
	// wait only the wake can run it. Before, the test waited for a snooze
	// with 3 s left and released the lock then: at load 14-21 it failed 4
	// of 41 runs, 3 seeing no such snooze within the 2 minutes, 1 where the
	// request's end, the holder's commit and the wake took longer than
	// the 3 s and the snooze ran out first.
	var waiter int64
	e.waitFor("a job held back for the lock", func() (bool, string) {
		err := e.store.Pool().QueryRow(e.ctx, `UPDATE river_job SET scheduled_at = now() + interval '1 hour'
			WHERE id = (SELECT id FROM river_job WHERE kind = $1 AND state IN ('scheduled', 'available')
				AND (metadata->>'memoryd_alone_holds')::int >= 1 AND scheduled_at > now()
				ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING id`, worker.ExtractJobKind).Scan(&waiter)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, extractJobs(t, e)
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
	release()
	// Not woken, the waiter runs in an hour: this wait fails first.
	e.waitDone(2)
	for _, turn := range [][2]string{{"user-a", "innocent"}, {"user-p", "poison"}} {
		got, err := e.store.GetTurn(e.ctx, turn[0], turn[1])
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "processed" {
			t.Errorf("turn %s/%s %s: %s", turn[0], turn[1], got.Status, got.LastError)
		}
	}
	var woken bool
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT scheduled_at < now() + interval '30 minutes' FROM river_job WHERE id = $1`, waiter).Scan(&woken); err != nil {
		t.Fatal(err)
	}
	if !woken {
		t.Errorf("the waiting job did not run before its snooze's end; want it woken when the lock was let go")
	}
}

// extractJobs describes the extraction jobs, for a wait's last state.
func extractJobs(t *testing.T, e *env) string {
	t.Helper()
	rows, err := e.store.Pool().Query(e.ctx, `SELECT id, state, attempt, round(extract(epoch FROM scheduled_at - now())::numeric, 2), metadata::text
		FROM river_job WHERE kind = $1 ORDER BY id`, worker.ExtractJobKind)
	if err != nil {
		return err.Error()
	}
	var out []string
	for rows.Next() {
		var (
			id, attempt int64
			state, meta string
			in          float64
		)
		if err := rows.Scan(&id, &state, &attempt, &in, &meta); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("job %d %s attempt %d due in %.2fs %s", id, state, attempt, in, meta))
	}
	if err := rows.Err(); err != nil {
		return err.Error()
	}
	return fmt.Sprint(len(out), " jobs: ", strings.Join(out, "; "))
}
