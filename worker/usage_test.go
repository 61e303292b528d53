package worker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
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
