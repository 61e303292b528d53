package worker_test

import (
	"fmt"
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

// TestFinalFailureCountsNotTheTurnAnotherJobHolds: as in
// TestFailureAfterALapsedClaimLeavesTheNewClaim, job A's claim of x
// lapsed and B took x; A's failure, final here, leaves x to B, which
// extracts it. The metrics counted x failed all the same (A's job named
// it), though no turn was failed.
func TestFinalFailureCountsNotTheTurnAnotherJobHolds(t *testing.T) {
	e := setup(t)
	obs := &turnOutcomes{n: map[string]int{}}
	const retried, second, third = "I live in Reykjavik.", "I have a dog.", "I have a cat."
	srv := extractortest.NewServer(t)
	aSent, bSent := make(chan struct{}), make(chan struct{})
	relA, relB := make(chan struct{}), make(chan struct{})
	var onceA, onceB sync.Once
	t.Cleanup(func() { onceA.Do(func() { close(relA) }); onceB.Do(func() { close(relB) }) })
	var (
		mu    sync.Mutex
		asked []string // the requests that held the retried turn, by who sent them
	)
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
		c.MaxAttempts = 1 // A's failure is final
		c.Observer = obs
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
	e.waitFor("A's failure recorded", func() (bool, string) {
		var states []string
		for _, j := range e.extractJobs() {
			states = append(states, fmt.Sprintf("%d %s %s", j.ID, j.State, j.EncodedArgs))
			if strings.Contains(string(j.EncodedArgs), `"x"`) && !strings.Contains(string(j.EncodedArgs), `"c1"`) && (j.State == rivertype.JobStateDiscarded || j.State == rivertype.JobStateCancelled) {
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
	if n := obs.get("failed"); n != 0 {
		t.Errorf("%d turns counted failed (%s); want none: A's final failure left x to B, which extracted it", n, obs)
	}
}

// turnOutcomes counts the turns Extracted reports, by outcome.
type turnOutcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *turnOutcomes) TurnRejected(string)     {}
func (o *turnOutcomes) Pruned(int64)            {}
func (o *turnOutcomes) Redacted(string, string) {}
func (o *turnOutcomes) Extracted(_ time.Duration, turns int, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[outcome] += turns
}

func (o *turnOutcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

func (o *turnOutcomes) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprint(o.n)
}
