package worker_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
