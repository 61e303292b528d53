package worker_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestRepeatedInvalidReplyFailsSooner: a model that gives the same
// unparseable replies to the same request at a second attempt fails the
// turn then, after 4 model calls, not after every attempt (--max-attempts
// 5: 10 calls); one whose garbage differs each time (sampling, a server
// cutting replies under load) still has every attempt.
func TestRepeatedInvalidReplyFailsSooner(t *testing.T) {
	for _, tt := range []struct {
		name      string
		reply     func(n int64) string
		wantCalls int
	}{
		{"same garbage", func(int64) string { return "I am sorry, I can only answer in prose." }, 4},
		{"other garbage each time", func(n int64) string { return fmt.Sprintf("garbage number %d", n) }, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			srv := extractortest.NewServer(t)
			var n atomic.Int64
			srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
				return extractortest.Content(tt.reply(n.Add(1)))
			})
			llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			e.start(llm, func(c *worker.Config) { c.MaxAttempts = 5 })
			e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
			if st := e.waitDone(1); st.TurnsFailed != 1 {
				t.Fatalf("stats %+v, want the turn failed", st)
			}
			if got := srv.Requests(); got != tt.wantCalls {
				t.Errorf("model calls = %d, want %d", got, tt.wantCalls)
			}
			turn, err := e.store.GetTurn(e.ctx, "alice", "t1")
			if err != nil {
				t.Fatal(err)
			}
			if repeated := strings.Contains(turn.LastError, "same invalid replies"); repeated != (tt.wantCalls == 4) {
				t.Errorf("turn error %q: says the replies repeated %v, want %v", turn.LastError, repeated, tt.wantCalls == 4)
			}
		})
	}
}
