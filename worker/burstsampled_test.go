package worker_test

import (
	"testing"

	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// TestBurstSampledInvalidRepliesSendsItsTurnsOneARequest: a sampling
// model (a temperature above 0) that answers a conversation's burst with
// a short canned refusal at every attempt, and each turn alone with JSON,
// has the burst's turns sent one a request once the burst's request got
// invalid replies at two attempts, as a greedy model's repeat does: every
// turn is processed. Before, such replies have no digest (a sampled short
// reply repeats by chance), the burst was never sent one a request, and
// its last attempt failed every turn of it for good.
func TestBurstSampledInvalidRepliesSendsItsTurnsOneARequest(t *testing.T) {
	e := setup(t)
	llm, batchCalls, turnCalls := burstOfThree(t, e, extractor.LLMConfig{Temperature: 0.7}, func(int64) string {
		return "I'm sorry, but I can't help with that."
	})
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 3 })
	burstProcessed(t, e)
	// Two attempts of the burst (two calls each), then each turn once.
	if b, o := batchCalls.Load(), turnCalls.Load(); b != 4 || o != 3 {
		t.Errorf("calls: %d for the burst, %d for its turns; want 4, 3", b, o)
	}
}
