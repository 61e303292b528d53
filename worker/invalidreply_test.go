package worker_test

import (
	"fmt"
	"strings"
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

// TestRepeatedInvalidReplySparesOtherTurns: in a job of two turns (JobSize
// 2, as replays' jobs of up to a hundred), one turn whose model repeats
// the same invalid replies does not fail for good the other, whose replies
// differ at each attempt and pass at its third: only the repeating turn
// fails. Before, the job's error was the first failed turn's (worse), its
// digest repeated at the second attempt, and the job was cancelled with
// both turns failed for good.
func TestRepeatedInvalidReplySparesOtherTurns(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var paris atomic.Int64
	srv.SetHandler(func(req openai.ChatCompletionRequest) extractortest.Reply {
		text, _, _ := extractor.PromptTurn(req.Messages[len(req.Messages)-1].Content)
		if !strings.Contains(text, "Paris") {
			return extractortest.Content("I am sorry, I can only answer in prose.")
		}
		if n := paris.Add(1); n <= 4 { // two attempts of two calls
			return extractortest.Content(fmt.Sprintf("garbage number %d", n))
		}
		return extractortest.Content(`{"facts":{"location":"Paris"}}`)
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	// Enqueued by a replay, which puts a user's turns in jobs of JobSize
	// whatever batches the stream's reads give (ingest, started on them,
	// made a job of each under load: CI).
	e.publish(events.Turn{ID: "a1", UserID: "alice", UserMessage: "Tell me a joke.", Timestamp: t0})
	e.publish(events.Turn{ID: "a2", UserID: "alice", UserMessage: "I live in Paris.", Timestamp: t0.Add(time.Minute)})
	if p := e.replayOnly(worker.ReplayConfig{JobSize: 2}); p.Enqueued != 2 {
		t.Fatalf("replay enqueued %d turns, want 2", p.Enqueued)
	}
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 5 })
	st := e.waitDone(2)
	var jobs int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, worker.ExtractJobKind).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 {
		t.Fatalf("%d extraction jobs, want the two turns in one", jobs)
	}
	if st.TurnsProcessed != 1 || st.TurnsFailed != 1 {
		t.Fatalf("stats %+v, want a1 failed and a2 processed at its third attempt", st)
	}
	if loc, err := e.store.Fact(e.ctx, "alice", "location"); err != nil || loc.Value != "Paris" {
		t.Errorf("alice location = %+v, %v; want Paris", loc, err)
	}
}

// TestRepeatedInvalidReplyRetryFailed: a turn failed for repeating its
// invalid replies gets a fresh job from retry-failed, the digest of its
// failed job not carried: the model still repeating, it fails after two
// attempts again (4 calls more); the model mended, it is extracted.
func TestRepeatedInvalidReplyRetryFailed(t *testing.T) {
	e := setup(t)
	srv := extractortest.NewServer(t)
	var mended atomic.Bool
	srv.SetHandler(func(openai.ChatCompletionRequest) extractortest.Reply {
		if mended.Load() {
			return extractortest.Content(`{"facts":{"name":"Alice"}}`)
		}
		return extractortest.Content("I am sorry, I can only answer in prose.")
	})
	llm, err := extractor.NewLLM(extractor.LLMConfig{BaseURL: srv.URL(), Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 5 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	failedOnce := func(want int) {
		t.Helper()
		e.waitFor("t1 failed", func() (bool, string) {
			turn, err := e.store.GetTurn(e.ctx, "alice", "t1")
			if err != nil {
				return false, err.Error()
			}
			return turn.Status == store.StatusFailed && srv.Requests() == want, fmt.Sprintf("%s after %d calls", turn.Status, srv.Requests())
		})
	}
	failedOnce(4)
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, false); err != nil || n != 1 {
		t.Fatalf("retry-failed: %d, %v", n, err)
	}
	failedOnce(8)
	mended.Store(true)
	if n, _, err := worker.RetryFailed(e.ctx, e.store, "alice", 10, false); err != nil || n != 1 {
		t.Fatalf("retry-failed: %d, %v", n, err)
	}
	e.waitFor("t1 processed", func() (bool, string) {
		turn, err := e.store.GetTurn(e.ctx, "alice", "t1")
		return err == nil && turn.Status == store.StatusProcessed, fmt.Sprintf("%+v %v", turn.Status, err)
	})
}
