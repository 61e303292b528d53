package worker_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestFailureAfterALapsedClaimLeavesTheNewClaim: a retried turn's job
// (A) whose claim lapsed while its request was with the model (its
// process stalled past the claim's TTL) is taken by the burst of a new
// turn of the conversation (B); A's request then fails. A's failure
// must leave B's claim alone: a third burst of the conversation (C)
// leaves the turn to B. Before, A's MarkFailed ended B's claim and C
// claimed the turn too, the model asked for it a third time while B's
// request for it was still out.
func TestFailureAfterALapsedClaimLeavesTheNewClaim(t *testing.T) {
	asked, _ := lapsedClaimScene(t, false)
	if len(asked) != 2 {
		t.Fatalf("the model was asked for x %d times (%v); want twice: by A, whose claim lapsed, and by B, which took it then", len(asked), asked)
	}
}

// lapsedClaimScene plays TestFailureAfterALapsedClaimLeavesTheNewClaim's
// scene, A's failure final when final is, to x, y and z processed, and
// returns who asked the model for x (A, B, C) and the turns the metrics
// counted by outcome.
func lapsedClaimScene(t *testing.T, final bool) (asked []string, counted *outcomes) {
	t.Helper()
	e := setup(t)
	counted = &outcomes{n: map[string]int{}}
	const retried, second, third = "I live in Reykjavik.", "I have a dog.", "I have a cat."
	srv := extractortest.NewServer(t)
	aSent, bSent := make(chan struct{}), make(chan struct{})
	relA, relB := make(chan struct{}), make(chan struct{})
	var onceA, onceB sync.Once
	t.Cleanup(func() { onceA.Do(func() { close(relA) }); onceB.Do(func() { close(relB) }) })
	var mu sync.Mutex // asked: the requests that held the retried turn, by who sent them
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		prompt := req.Messages[len(req.Messages)-1].Content
		if !strings.Contains(prompt, retried) {
			return extractortest.Content(`{"facts":[],"context":[]}`)
		}
		msg, _, alone := extractor.PromptTurn(prompt)
		mu.Lock()
		first := len(asked) == 0
		who := "other"
		switch {
		case first && alone && msg == retried:
			who = "A"
		case strings.Contains(prompt, second) && !strings.Contains(prompt, third):
			who = "B"
		case strings.Contains(prompt, third):
			who = "C"
		}
		asked = append(asked, who)
		mu.Unlock()
		switch who {
		case "A":
			close(aSent)
			<-relA
			return extractortest.Error(500, "server error")
		case "B":
			close(bSent)
			<-relB
		}
		return extractortest.Content(`{"facts":[],"context":[]}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	x := store.Turn{UserID: "alice", EventID: "x", ConversationID: "c1", UserMessage: retried, AssistantResponse: "ok", TurnAt: t0}
	if _, err := e.store.InsertTurns(e.ctx, []store.Turn{x}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.MarkFailed(e.ctx, "alice", []string{"x"}, "the model was down", true); err != nil {
		t.Fatal(err)
	}
	// A's retry comes a minute after its failure, past the test's end:
	// only the jobs of the new turns run meanwhile.
	e.startWorker(llm, func(c *worker.Config) {
		c.ExtractDebounce = 50 * time.Millisecond
		c.JobRetryBase = time.Minute
		c.Observer = counted
		if final {
			c.MaxAttempts = 1
		}
	})
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, false); err != nil || n != 1 {
		t.Fatalf("retry failed: %d, %v; want x retried", n, err)
	}
	waitClosed(t, aSent, "the retried turn's request")
	// A's claim lapses, as when its process stalls past the claim's TTL.
	tag, err := e.store.Pool().Exec(e.ctx, `UPDATE turns SET claimed_until = now() - interval '1 second'
		WHERE user_id = 'alice' AND event_id = 'x' AND claimed_by IS NOT NULL AND claimed_until > now()`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("lapse A's claim: %v, %v; want A's claim on x", tag, err)
	}
	e.publish(events.Turn{ID: "y", UserID: "alice", ConversationID: "c1", UserMessage: second, AssistantResponse: "ok", Timestamp: t0.Add(time.Minute)})
	waitClosed(t, bSent, "the burst of y, which took x")
	onceA.Do(func() { close(relA) })
	// A's job then waits for its retry, or ends when its failure is final.
	ended := func(st rivertype.JobState) bool {
		if final {
			return st == rivertype.JobStateDiscarded || st == rivertype.JobStateCancelled
		}
		return st == rivertype.JobStateRetryable
	}
	e.waitFor("A's failure recorded", func() (bool, string) {
		var states []string
		for _, j := range e.extractJobs() {
			states = append(states, fmt.Sprintf("%d %s %s", j.ID, j.State, j.EncodedArgs))
			if strings.Contains(string(j.EncodedArgs), `"x"`) && !strings.Contains(string(j.EncodedArgs), `"c1"`) && ended(j.State) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("jobs %v", states)
	})
	e.publish(events.Turn{ID: "z", UserID: "alice", ConversationID: "c1", UserMessage: third, AssistantResponse: "ok", Timestamp: t0.Add(2 * time.Minute)})
	e.waitFor("z processed", func() (bool, string) {
		turn, err := e.store.GetTurn(e.ctx, "alice", "z")
		return err == nil && turn.Status == store.StatusProcessed, fmt.Sprintf("%+v %v", turn, err)
	})
	onceB.Do(func() { close(relB) })
	if st := e.waitDone(3); st.TurnsProcessed != 3 {
		t.Fatalf("stats %+v, want x, y and z processed", st)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(asked), counted
}
