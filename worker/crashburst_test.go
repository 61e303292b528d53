package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// burstCrashRun stores a burst of 4 turns of one conversation, the third
// holding poison, with a debounced job each, the first due now and the
// others later (as for turns that came a while after it), so that the
// first job extracts the burst and the others name their turns meanwhile
// (else the reconcile run at the worker's start would give turns the crash
// released jobs of their own, each sending them again). It runs a worker
// whose model server crashes on poison (crashLimit as crashingServer's)
// until no turn is pending, and returns the server and the turns.
func burstCrashRun(t *testing.T, crashLimit int64) (*crashingServer, []store.Turn) {
	t.Helper()
	e := setup(t)
	const marker = "ZZ-CRASH-THE-RUNNER-ZZ"
	// A short restart: the job's retry finds the server down once or
	// twice and waits, then sends the turns alone.
	srv := newCrashingServer(t, marker, 200*time.Millisecond)
	srv.crashLimit = crashLimit
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	turns, ids := poisonTurns(marker, "b", 4, 2, "c1")
	insertBurst(t, e, turns, ids)
	e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 5
		c.JobRetryBase = 300 * time.Millisecond
	})
	turns = settledTurns(t, e, srv, ids)
	return srv, turns
}

// insertBurst stores turns (of user u and one conversation, event ids
// ids), with a debounced job each, the first due now and the others later
// (as for turns that came a while after it), so that the first job
// extracts the burst alone and the others name their turns meanwhile.
func insertBurst(t *testing.T, e *env, turns []store.Turn, ids []string) {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := q.InsertTurns(e.ctx, turns); err != nil {
			return err
		}
		jobs := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			jobs[i] = river.InsertManyParams{Args: worker.ExtractArgs{UserID: turns[i].UserID, EventIDs: []string{id}, ConversationID: turns[i].ConversationID}}
			if i > 0 {
				jobs[i].InsertOpts = &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}
			}
		}
		_, err := client.InsertManyTx(e.ctx, tx, jobs)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPoisonTurnInABurst: a conversation's debounced burst is extracted in
// one request; when that request brings the model server down, the burst's
// next run sends its turns one a request, each alone and with the
// conversation's earlier turns, so that the second crash is the poison
// turn's: it alone fails for good, and the burst's other turns are
// processed. Before, the burst was sent again whole, and at the second
// crash every turn of it failed for good with the crash reason.
func TestPoisonTurnInABurst(t *testing.T) {
	srv, turns := burstCrashRun(t, 0)
	for _, turn := range turns {
		switch {
		case turn.EventID == "b2" && (turn.Status != "failed" || !strings.HasPrefix(turn.LastError, worker.CrashedReason+" 2 times")):
			t.Errorf("poison turn %s: %s %q; want failed for its crashes", turn.EventID, turn.Status, turn.LastError)
		case turn.EventID != "b2" && turn.Status != "processed":
			t.Errorf("turn %s: %s %q; want processed (only the poison turn's request crashes the server)", turn.EventID, turn.Status, turn.LastError)
		}
	}
	if n := srv.poisonSent.Load(); n != 2 {
		t.Errorf("poison sent %d times, each a crash; want 2 (the burst, then the poison turn alone)", n)
	}
	// Each turn was extracted with the conversation's earlier turns as
	// context (the poison one left out after it failed): that before the
	// poison one in the burst's run, that after it in its own job.
	for _, b := range srv.answeredBodies() {
		last := -1
		for i := range 4 {
			if strings.Contains(b, fmt.Sprintf("%d cats", i)) {
				last = i
			}
		}
		for i := range last {
			if i != 2 && !strings.Contains(b, fmt.Sprintf("%d cats", i)) {
				t.Errorf("the request of turn b%d lacks turn b%d of its conversation: %s", last, i, b)
			}
		}
	}
}

// TestBurstCutByAnUnrelatedCrashIsProcessed: a burst whose request was in
// flight when the server went down once for another reason (an OOM kill of
// another cause, a deploy) has every turn processed, one a request.
func TestBurstCutByAnUnrelatedCrashIsProcessed(t *testing.T) {
	_, turns := burstCrashRun(t, 1)
	for _, turn := range turns {
		if turn.Status != "processed" {
			t.Errorf("turn %s: %s %q; want processed", turn.EventID, turn.Status, turn.LastError)
		}
	}
}
