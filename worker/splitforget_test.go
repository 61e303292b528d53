package worker_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestBurstSplitAfterAForgetGivesNoJobs: a forget of the user while her
// burst's request is with the model deletes her turns and jobs; the split
// that follows (the request's replies invalid at the job's last attempt)
// hands over no turn, so it inserts no job naming her. Before, it inserted
// a job for each of the burst's other turns, deleted or not: jobs naming
// the forgotten user's event ids, left in river_job after her forget.
func TestBurstSplitAfterAForgetGivesNoJobs(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var batchCalls atomic.Int64
	turnCall := make(chan struct{})
	var once sync.Once
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		if _, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content); !ok {
			if batchCalls.Add(1) == 1 {
				// Forgotten while the burst's request is with the model.
				if _, _, err := e.store.ForgetUser(e.ctx, "u", events.UserToken("u"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs); err != nil {
					t.Errorf("forget: %v", err)
				}
			}
			return extractortest.Content("I am sorry, I can only answer in prose.")
		}
		// The job's own turn, sent after the split committed.
		once.Do(func() { close(turnCall) })
		return extractortest.Content(`{"facts":{"name":"Alice"}}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns("", "b", 3, -1, "c1")
	insertBurst(t, e, turns, ids)
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	select {
	case <-turnCall:
	case <-time.After(time.Minute):
		t.Fatal("the burst's job sent no turn of its own within a minute")
	}
	var jobs []string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(args->>'event_ids' ORDER BY id), '{}') FROM river_job
		WHERE kind = $1 AND args->>'user_id' = 'u'`, worker.ExtractJobKind).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("jobs naming the forgotten user after her burst's split: %v; want none", jobs)
	}
}

// TestBurstSplitDuringAForgetGivesNoJobs: the ordering the test above does
// not reach. A forget of the user has deleted her jobs (its first pass)
// and waits for a turn of hers another transaction holds when her burst's
// split inserts the jobs of the burst's other turns and commits: the
// forget, let go, deletes those too (its second pass over the jobs,
// after the turns), so no job names her once it has committed. The split
// takes no user lock: a forget that began first deletes what it wrote
// either way, and one that locked her turns first leaves it nothing to
// hand over (the test above).
func TestBurstSplitDuringAForgetGivesNoJobs(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var batchCalls atomic.Int64
	batch, release := make(chan struct{}), make(chan struct{})
	turnCall := make(chan struct{})
	var once sync.Once
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		if _, _, ok := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content); !ok {
			if batchCalls.Add(1) == 1 {
				close(batch)
				<-release
			}
			return extractortest.Content("I am sorry, I can only answer in prose.")
		}
		// A turn sent alone: the split has committed.
		once.Do(func() { close(turnCall) })
		return extractortest.Content(`{"facts":{"name":"Alice"}}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns("", "b", 3, -1, "c1")
	insertBurst(t, e, turns, ids)
	// A pending turn of hers before the burst's, in another conversation,
	// with a job of later: the first turn the forget locks.
	before := store.Turn{UserID: "u", EventID: "a0", ConversationID: "c0", UserMessage: "I have a dog.", AssistantResponse: "ok",
		TurnAt: turns[0].TurnAt.Add(-time.Minute)}
	insertLater(t, e, before)
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 1
		c.LockTimeout = time.Minute // the job's save waits for the forget
	})
	waitClosed(t, batch, "the burst's request")
	hold := e.block(`SELECT FROM turns WHERE user_id = 'u' AND event_id = 'a0' FOR UPDATE`)
	forgot := make(chan error, 1)
	go func() {
		_, _, err := e.store.ForgetUser(e.ctx, "u", events.UserToken("u"), store.StreamPosition{Seq: 1000}, worker.ExtractJobs)
		forgot <- err
	}()
	// Past its first delete of her jobs, it waits for a0 before it locks
	// any turn of the burst.
	e.waitBlocked("the forget to wait for a0", hold.pid)
	close(release)
	waitClosed(t, turnCall, "a turn of the split burst sent alone")
	var handed int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'user_id' = 'u'
		AND metadata->>'memoryd_burst_split' = 'true'`, worker.ExtractJobKind).Scan(&handed); err != nil || handed == 0 {
		t.Fatalf("jobs the split handed over while the forget waited: %d (%v); want some: the ordering was not reached", handed, err)
	}
	if err := hold.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	waitForgot(t, forgot)
	var jobs []string
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT coalesce(array_agg(args->>'event_ids' ORDER BY id), '{}') FROM river_job
		WHERE kind = $1 AND args->>'user_id' = 'u'`, worker.ExtractJobKind).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 0 {
		t.Fatalf("jobs naming the forgotten user after a split during her forget: %v; want none", jobs)
	}
}

// insertLater inserts turn with a job scheduled an hour from now.
func insertLater(t *testing.T, e *env, turn store.Turn) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, []store.Turn{turn}); err != nil {
			return err
		}
		_, err := client.InsertTx(e.ctx, tx, worker.ExtractArgs{UserID: turn.UserID, EventIDs: []string{turn.EventID}, ConversationID: turn.ConversationID},
			&river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitClosed waits for c to be closed, for at most a minute.
func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waitForgot waits for the result of a forget a test ran in a goroutine,
// and fails the test on its error or after a minute.
func waitForgot(t *testing.T, forgot <-chan error) {
	t.Helper()
	select {
	case err := <-forgot:
		if err != nil {
			t.Fatalf("forget: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the forget did not end within a minute")
	}
}
