package worker_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestUsageCountsStoredAndFailedCalls: the tokens of a call whose results
// are stored (counted in the transaction that stores them) and of calls that
// failed (counted on their own) both end up in the user's usage, once each.
func TestUsageCountsStoredAndFailedCalls(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		text, _, _ := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		if strings.Contains(text, "Paris") {
			return extractortest.Content(`{"facts":{"location":"Paris"},"context":[{"q":"Where do I live?","a":"Paris"}]}`)
		}
		return extractortest.Content(`this is not an extraction`) // every 15 tokens
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 1
		c.JobSize = 2
	})
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", Timestamp: t0})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "Tell me a joke.", Timestamp: t0.Add(time.Minute)})
	st := e.waitDone(2)
	if st.TurnsProcessed != 1 || st.TurnsFailed != 1 {
		t.Fatalf("stats = %+v; want a1 processed and a2 failed", st)
	}
	alice, err := e.store.Stats(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	// Each request is 10 prompt and 5 completion tokens; one extraction a
	// turn (a2's includes the request asking again after the bad reply).
	n := int64(srv.Requests())
	if u := alice.LLMUsage["fake"]; n < 3 || u.PromptTokens != 10*n || u.CompletionTokens != 5*n || u.Extractions != 2 {
		t.Fatalf("alice's usage = %+v after %d requests; want %d prompt and %d completion tokens over 2 extractions", alice.LLMUsage, n, 10*n, 5*n)
	}
	if alice.TokensToday != 15*n {
		t.Fatalf("alice's tokens today = %d, want %d", alice.TokensToday, 15*n)
	}
}

// TestUsageOfOtherUsersStoredPastALockedOne: a legacy job holding two
// users' turns (one enqueued before jobs were per user) whose calls failed
// stores each user's tokens on its own; while a forget holds alice's lock
// her count cannot be stored, and carol's still is (before: the first
// error dropped every count after it).
func TestUsageOfOtherUsersStoredPastALockedOne(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		return extractortest.Content(`this is not an extraction`) // every 15 tokens
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	jobs := e.recordTurns(recoverTurn("x", "alice"), recoverTurn("y", "carol"))
	e.exec(`UPDATE river_job SET args = jsonb_build_object('event_ids', jsonb_build_array('x', 'y')) WHERE id = $1`, jobs["x"])
	e.exec(`DELETE FROM river_job WHERE id = $1`, jobs["y"])
	// alice's user lock, held as a forget holds it.
	forget := e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1::text, 0))`, events.UserToken("alice"))
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	e.waitFor("carol's tokens stored", func() (bool, string) {
		carol, err := e.store.Stats(e.ctx, "carol")
		return err == nil && carol.TokensToday > 0, fmt.Sprint(carol.LLMUsage, err)
	})
	if alice, err := e.store.Stats(e.ctx, "alice"); err != nil || alice.TokensToday != 0 {
		t.Fatalf("alice's usage while her lock is held = %+v, %v; want none stored", alice.LLMUsage, err)
	}
	if err := forget.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUsageOfCallsFlushedDuringAnOutageIsKept: the tokens of a run's calls
// whose results are not stored (here a turn's two invalid replies) are
// stored once the database answers again when their flush meets it out of
// reach (the flush's connection terminated under it, as Postgres going
// down does), with the next run's, each call once. Before, they were
// dropped: a user was billed for one call of three.
func TestUsageOfCallsFlushedDuringAnOutageIsKept(t *testing.T) {
	e, stop := usageFlushCut(t, 2)
	e.waitFor("the turn processed", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsProcessed == 1, fmt.Sprintf("%+v %v", st, err)
	})
	// Its job's end: after the run's last flush.
	e.waitFor("the turn's job ended", func() (bool, string) {
		var states []string
		err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(state::text), '{}') FROM river_job WHERE kind = $1`, worker.ExtractJobKind).Scan(&states)
		return err == nil && len(states) == 1 && states[0] == "completed", fmt.Sprint(states, err)
	})
	checkUsage(t, e, 3, 2)
	stop()
	checkUsage(t, e, 3, 2)
}

// TestUsageOfCallsFlushedDuringAnOutageIsStoredAtStop: with no run after
// the one whose flush met the database out of reach (the turn failed at
// its one attempt), the worker's stop stores the calls' tokens. Before,
// they were dropped.
func TestUsageOfCallsFlushedDuringAnOutageIsStoredAtStop(t *testing.T) {
	e, stop := usageFlushCut(t, 1)
	e.waitFor("the turn failed", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "alice")
		return err == nil && st.TurnsFailed == 1, fmt.Sprintf("%+v %v", st, err)
	})
	stop()
	checkUsage(t, e, 2, 1)
}

// usageFlushCut starts a worker of attempts attempts and publishes a turn
// of alice's that the model answers twice with an invalid reply (asked
// again after the first) and then with an extraction; the flush of the
// invalid replies' tokens meets its connection terminated.
func usageFlushCut(t *testing.T, attempts int) (*env, func()) {
	t.Helper()
	e := setup(t)
	// The user's lock as the flush's AddTurnUsage takes it (LockUsers),
	// the first statement of the flush; no save comes between the reply
	// and it (the run extracted nothing to store).
	kill := e.killBackends(t, "count(pg_advisory_xact_lock_shared(")
	t.Cleanup(func() {
		kill.mu.Lock()
		defer kill.mu.Unlock()
		if kill.err != nil || kill.kills != 1 || kill.got == nil {
			t.Errorf("backends terminated: %d (%v), the flush's statement failing with %v; want the first flush's", kill.kills, kill.err, kill.got)
		}
	})
	llm := aliceModel(t, func(n int) *extractortest.Reply {
		if n > 2 {
			return nil // the next run's call: an extraction
		}
		if n == 2 {
			kill.arm() // asked again after the bad reply, and bad again: then the flush
		}
		r := extractortest.Content(`this is not an extraction`) // every 15 tokens
		return &r
	})
	stop := e.start(llm, func(c *worker.Config) { c.MaxAttempts = attempts })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	return e, stop
}

// checkUsage fails the test unless alice's usage is that of calls calls
// (10 prompt and 5 completion tokens each) over extractions extractions.
func checkUsage(t *testing.T, e *env, calls, extractions int64) {
	t.Helper()
	alice, err := e.store.Stats(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if u := alice.LLMUsage["fake"]; u.PromptTokens != 10*calls || u.CompletionTokens != 5*calls || u.Extractions != extractions || alice.TokensToday != 15*calls {
		t.Fatalf("alice's usage = %+v, %d tokens today; want %d calls' %d prompt and %d completion tokens over %d extractions, each once",
			alice.LLMUsage, alice.TokensToday, calls, 10*calls, 5*calls, extractions)
	}
}

// heldLockScene starts a worker whose model answers alice's turn twice
// with no extraction (15 tokens each), the second answer only once alice's
// lock is held exclusively, as a forget holds it; bob's turn gets a valid
// extraction. It returns the worker's log, the held lock and the stop.
func heldLockScene(t *testing.T, e *env) (logs *eventstest.SyncBuffer, lock *blocker, stop func()) {
	t.Helper()
	called, held := make(chan struct{}), make(chan struct{})
	llm := aliceModel(t, func(n int) *extractortest.Reply {
		if n > 2 {
			return nil // bob's turn: a valid extraction
		}
		if n == 1 {
			close(called)
			<-held
		}
		r := extractortest.Content(`this is not an extraction`) // every 15 tokens
		return &r
	})
	logs = new(eventstest.SyncBuffer)
	stop = e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 1
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	<-called
	lock = e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1::text, 0))`, events.UserToken("alice"))
	close(held)
	return logs, lock, stop
}

// TestUsageFlushedBehindALongLockWaitIsKept: the tokens of a run's calls
// whose results are not stored (a turn's two invalid replies), flushed
// while the user's lock is held past the flush's bound (as a forget waiting
// behind a long transaction holds it), are kept for the next flush, here
// the worker's stop, and stored once the lock is free. Before, the flush
// gave up after 5 s and dropped them: the calls counted nowhere.
func TestUsageFlushedBehindALongLockWaitIsKept(t *testing.T) {
	e := setup(t)
	logs, lock, stop := heldLockScene(t, e)
	e.waitFor("the flush behind the lock to give up", func() (bool, string) {
		return strings.Contains(logs.String(), "token usage"), logs.String()
	})
	if err := lock.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	checkUsage(t, e, 2, 1)
}

// TestUsageBacklogBehindAHeldLockHoldsUpNoOtherJob: while a user's lock
// stays held (a forget waiting behind a long transaction), the calls of
// theirs a flush kept for later do not make every other job's flush wait
// for that lock again: another user's job ends without a second wait (no
// second warning), and the calls are stored once the lock is free. Before,
// each job's end waited up to 5 s on the held lock, then kept them again.
func TestUsageBacklogBehindAHeldLockHoldsUpNoOtherJob(t *testing.T) {
	e := setup(t)
	logs, lock, stop := heldLockScene(t, e)
	const kept = "the user's lock is held"
	e.waitFor("the flush behind the lock to keep alice's calls", func() (bool, string) {
		return strings.Contains(logs.String(), kept), logs.String()
	})
	e.publish(events.Turn{ID: "b1", UserID: "bob", UserMessage: "My name is Bob."})
	e.waitFor("bob's job to end", func() (bool, string) {
		var ended, open int
		err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state NOT IN ('completed', 'discarded', 'cancelled'))
			FROM river_job WHERE kind = $1`, worker.ExtractJobKind).Scan(&ended, &open)
		return err == nil && ended == 1 && open == 0, fmt.Sprintf("%d completed, %d open, %v", ended, open, err)
	})
	if n := strings.Count(logs.String(), kept); n != 1 {
		t.Errorf("%d warnings that alice's lock is held, after bob's job ended; want 1 (bob's flush not waiting for her lock):\n%s", n, logs.String())
	}
	if err := lock.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	checkUsage(t, e, 2, 1)
}
