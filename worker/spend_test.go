package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// testClock is a clock a test moves by hand.
type testClock struct{ now atomic.Pointer[time.Time] }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.set(t)
	return c
}

func (c *testClock) set(t time.Time) { c.now.Store(&t) }
func (c *testClock) Now() time.Time  { return *c.now.Load() }

// spendModel is a fake model that states the city the turn names (each
// reply counts 15 tokens) with a question the rules extractor never asks, so
// that stored context tells which extractor made it.
func spendModel(t *testing.T) (*extractortest.Server, *extractor.LLM) {
	t.Helper()
	srv := extractortest.NewServer(t)
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		// The turn alone: the prompt also shows current facts and earlier
		// turns, which may name other cities.
		text, _, _ := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		for _, city := range []string{"Paris", "Berlin", "Oslo", "Rome"} {
			if strings.Contains(text, city) {
				answer := city
				if city == "Berlin" {
					// A secret the model made up: the re-extraction after a
					// cap's reset must redact it like any extraction.
					answer += ", card 4111 1111 1111 1111"
				}
				return extractortest.Content(fmt.Sprintf(`{"facts":{"location":%q},"context":[{"q":"Which city do I live in (model)?","a":%q}]}`, city, answer))
			}
		}
		return extractortest.Content(`{"facts":{},"context":[]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, llm
}

// provenance is the extractor that wrote the user's fact key with its value
// ("" without the fact), and the
// extractors of the context items of the user's turn eventID, sorted.
func (e *env) provenance(userID, key, eventID string) (fact string, items []string) {
	e.t.Helper()
	err := e.store.Pool().QueryRow(e.ctx, `SELECT extractor || ':' || value FROM facts WHERE user_id = $1 AND key = $2`, userID, key).Scan(&fact)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		e.t.Fatalf("fact %s of %s: %v", key, userID, err)
	}
	rows, err := e.store.Pool().Query(e.ctx, `SELECT extractor FROM context WHERE user_id = $1 AND event_id = $2 ORDER BY extractor`, userID, eventID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var x string
		if err := rows.Scan(&x); err != nil {
			e.t.Fatal(err)
		}
		items = append(items, x)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return fact, items
}

// overCapJobs returns the over-cap extraction jobs, oldest first.
func (e *env) overCapJobs() []*rivertype.JobRow {
	e.t.Helper()
	var out []*rivertype.JobRow
	for _, j := range e.extractJobs() {
		var a worker.ExtractArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			e.t.Fatal(err)
		}
		if a.OverCap {
			out = append(out, j)
		}
	}
	return out
}

// processOne publishes a turn and waits until n turns are done.
func (e *env) processOne(turn events.Turn, n int64) {
	e.t.Helper()
	e.publish(turn)
	e.waitDone(n)
}

// TestSpendCapPerUser: a user whose spend of the day reached the per-user
// cap gets the offline rules extraction (stored with its provenance) and a
// job for the next UTC day, while another user is unaffected; after the
// reset (the injected clock moved to the next day) that job extracts the
// turn again with the model and replaces the offline memory, leaving no
// duplicate.
func TestSpendCapPerUser(t *testing.T) {
	e := setup(t)
	srv, llm := spendModel(t)
	day1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clock := newTestClock(day1)
	w, _ := e.startWorker(llm, func(c *worker.Config) {
		c.DailyTokensPerUser = 15 // one model call
		c.Now = clock.Now
	})

	e.processOne(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", Timestamp: t0}, 1)
	e.processOne(events.Turn{ID: "a2", UserID: "alice", ConversationID: "c2", UserMessage: "I live in Berlin.", Timestamp: t0.Add(time.Minute)}, 2)
	e.processOne(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I live in Oslo.", Timestamp: t0}, 3)

	if n := srv.Requests(); n != 2 {
		t.Fatalf("model requests = %d, want 2 (alice's first turn and bob's)", n)
	}
	if fact, items := e.provenance("alice", "location", "a2"); fact != "rules:Berlin" || !slices.Equal(items, []string{"rules"}) {
		t.Fatalf("alice over the cap: location by %q, context of a2 by %v; want the rules extractor's", fact, items)
	}
	if fact, items := e.provenance("bob", "location", "b1"); fact != "llm:Oslo" || !slices.Equal(items, []string{"llm"}) {
		t.Fatalf("bob under the cap: location by %q, context by %v; want the model's", fact, items)
	}
	sp, err := w.Spend(e.ctx)
	if err != nil || sp.Tokens != 30 || sp.OverCapTurns != 1 || sp.DailyTokensPerUser != 15 || !sp.Day.Equal(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("spend = %+v, %v; want 30 tokens on 2026-11-21, one turn over the cap", sp, err)
	}

	jobs := e.overCapJobs()
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateScheduled || !strings.Contains(string(jobs[0].EncodedArgs), `"a2"`) {
		t.Fatalf("over-cap jobs = %+v; want one scheduled job for a2", jobs)
	}
	// Scheduled for the reset: 14h after 10:00 by the injected clock.
	if wait := time.Until(jobs[0].ScheduledAt); wait < 13*time.Hour || wait > 15*time.Hour {
		t.Fatalf("over-cap job scheduled in %s, want about 14h (at the next UTC midnight)", wait)
	}

	// The next UTC day: the cap is reset; run the job now rather than wait.
	clock.set(day1.Add(14*time.Hour + time.Second))
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.JobRetry(e.ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	overCapJobReplacesRules(t, e, client, jobs[0].ID, "after the reset")
	if n := srv.Requests(); n != 3 {
		t.Fatalf("model requests = %d, want 3", n)
	}
	// Written as save writes: redacted, with the turn's conversation.
	var answer, conv string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT c.answer, f.conversation_id FROM context c, facts f
		WHERE c.user_id = 'alice' AND c.event_id = 'a2' AND f.user_id = 'alice' AND f.key = 'location'`).Scan(&answer, &conv); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(answer, "4111") || !strings.Contains(answer, "[redacted:card]") || conv != "c2" {
		t.Fatalf("re-extracted context answer %q, fact conversation %q; want the card redacted and conversation c2", answer, conv)
	}
	st, err := e.store.Stats(e.ctx, "alice")
	if err != nil || st.ContextItems != 2 || st.Facts != 1 {
		t.Fatalf("alice's stats = %+v, %v; want 2 context items (one per turn) and 1 fact", st, err)
	}
	sp, err = w.Spend(e.ctx)
	if err != nil || sp.Tokens != 15 {
		t.Fatalf("spend of the new day = %+v, %v; want the 15 tokens of the re-extraction", sp, err)
	}
}

// TestSpendCapGlobal: once every user's spend of the day reached the global
// cap, a user who spent nothing gets the offline extraction too, and a job
// that finds the cap still reached when it runs waits for the next reset.
func TestSpendCapGlobal(t *testing.T) {
	e := setup(t)
	srv, llm := spendModel(t)
	day1 := time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)
	clock := newTestClock(day1)
	e.start(llm, func(c *worker.Config) {
		c.DailyTokens = 15
		c.Now = clock.Now
	})

	e.processOne(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", Timestamp: t0}, 1)
	e.processOne(events.Turn{ID: "b1", UserID: "bob", UserMessage: "I live in Rome.", Timestamp: t0}, 2)
	if n := srv.Requests(); n != 1 {
		t.Fatalf("model requests = %d, want 1", n)
	}
	if fact, _ := e.provenance("bob", "location", "b1"); fact != "rules:Rome" {
		t.Fatalf("bob over the global cap: location by %q, want the rules extractor's", fact)
	}
	jobs := e.overCapJobs()
	if len(jobs) != 1 {
		t.Fatalf("over-cap jobs = %+v, want one (bob's)", jobs)
	}
	// Run it while the day is not over: the cap still holds, so it waits
	// for the next reset (2h by the injected clock) and calls no model.
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.JobRetry(e.ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the over-cap job snoozed", func() (bool, string) {
		j, err := client.JobGet(e.ctx, jobs[0].ID)
		if err != nil {
			return false, err.Error()
		}
		wait := time.Until(j.ScheduledAt)
		return j.AttemptedAt != nil && j.State == rivertype.JobStateScheduled && wait > time.Hour && wait < 3*time.Hour, fmt.Sprintf("%s in %s", j.State, wait)
	})
	if n := srv.Requests(); n != 1 {
		t.Fatalf("model requests = %d, want 1 (no call over the cap)", n)
	}
	if fact, _ := e.provenance("bob", "location", "b1"); fact != "rules:Rome" {
		t.Fatalf("bob's location by %q, want the rules extractor's still", fact)
	}
}

// TestSpendCapBurst: a debounced burst of a user over the cap is extracted
// by the offline extractor in one batch, and every turn of it gets a job
// for the model after the reset.
func TestSpendCapBurst(t *testing.T) {
	e := setup(t)
	srv, llm := spendModel(t)
	day1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	// alice spent her day already.
	if _, err := e.store.AddTurnUsage(e.ctx, events.UserToken("alice"), store.StreamPosition{}, "alice", "fake", day1, store.TokenUsage{PromptTokens: 100, Extractions: 1}, store.CallID{}); err != nil {
		t.Fatal(err)
	}
	ids := e.publishBurst("c1")
	e.start(llm, func(c *worker.Config) {
		c.DailyTokensPerUser = 100
		c.Now = newTestClock(day1).Now
		c.ExtractDebounce = 100 * time.Millisecond
	})
	e.waitDone(3)
	if n := srv.Requests(); n != 0 {
		t.Fatalf("model requests = %d, want none over the cap", n)
	}
	for _, id := range ids {
		if _, items := e.provenance("alice", "pet", id); !slices.Equal(items, []string{"rules"}) {
			t.Fatalf("context of %s by %v, want the rules extractor's", id, items)
		}
	}
	var later []string
	for _, j := range e.overCapJobs() {
		var a worker.ExtractArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		later = append(later, a.EventIDs...)
	}
	slices.Sort(later)
	if !slices.Equal(later, ids) {
		t.Fatalf("turns waiting for the model = %v, want %v", later, ids)
	}
}

// TestOverCapLockWaitEndsWithinTheJobsTime: the re-extraction after a
// cap's reset waits for the user's lock (held as a forget holds it) no
// longer than the save does: under half of the job's remaining time, so
// that the wait ends as a lock timeout, not as the job's own timeout.
// Before, it waited the whole LockTimeout (here an hour), and the job ran
// out of its JobTimeout waiting. And the lock timeout is what it is on the
// normal path, a snooze counted in memoryd_lock_waits that spends no
// attempt: before (review57), the over-cap job returned it as an ordinary
// error, an attempt spent on a lock another transaction held. (The flush
// of the call's tokens before it gives up on the lock after
// afterCancelTimeout, 5 s: the JobTimeout leaves room for it.)
func TestOverCapLockWaitEndsWithinTheJobsTime(t *testing.T) {
	e := setup(t)
	srv, _ := spendModel(t)
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake", Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	day1 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	clock := newTestClock(day1)
	e.start(llm, func(c *worker.Config) {
		c.DailyTokensPerUser = 15 // one model call
		c.Now = clock.Now
		c.JobTimeout = 10 * time.Second
		c.LockTimeout = time.Hour
	})
	e.processOne(events.Turn{ID: "a1", UserID: "alice", UserMessage: "I live in Paris.", Timestamp: t0}, 1)
	e.processOne(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Berlin.", Timestamp: t0.Add(time.Minute)}, 2)
	jobs := e.overCapJobs()
	if len(jobs) != 1 {
		t.Fatalf("over-cap jobs = %+v, want one (a2's)", jobs)
	}

	lock := e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1::text, 0))`, events.UserToken("alice"))
	clock.set(day1.Add(14*time.Hour + time.Second))
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.JobRetry(e.ctx, jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	var (
		ended *rivertype.JobRow
		meta  struct {
			Waits  int    `json:"memoryd_lock_waits"`
			Reason string `json:"memoryd_snooze_reason"`
		}
	)
	e.waitFor("the over-cap job's run behind the lock to end", func() (bool, string) {
		j, err := client.JobGet(e.ctx, jobs[0].ID)
		if err != nil {
			return false, err.Error()
		}
		_ = json.Unmarshal(j.Metadata, &meta)
		ended = j
		return len(j.Errors) > 0 || meta.Waits > 0, fmt.Sprintf("%s, errors %+v, metadata %s", j.State, j.Errors, j.Metadata)
	})
	if len(ended.Errors) > 0 || meta.Waits < 1 || !strings.Contains(meta.Reason, "lock timeout") {
		t.Fatalf("the over-cap job's run behind the user's lock ended with errors %+v, metadata %s; want a lock timeout snoozed as a lock wait (memoryd_lock_waits), no attempt spent",
			ended.Errors, ended.Metadata)
	}

	if err := lock.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	overCapJobReplacesRules(t, e, client, jobs[0].ID, "after the lock")
}

// overCapJobReplacesRules waits for the over-cap job id to complete and
// checks that alice's location fact and the context of her turn a2 are
// the model's alone (when: the test's moment, for the message).
func overCapJobReplacesRules(t *testing.T, e *env, client *river.Client[pgx.Tx], id int64, when string) {
	t.Helper()
	e.waitFor("the over-cap job completed", func() (bool, string) {
		j, err := client.JobGet(e.ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return j.State == rivertype.JobStateCompleted, string(j.State)
	})
	if fact, items := e.provenance("alice", "location", "a2"); fact != "llm:Berlin" || !slices.Equal(items, []string{"llm"}) {
		t.Fatalf("%s: location by %q, context of a2 by %v; want the model's alone", when, fact, items)
	}
}
