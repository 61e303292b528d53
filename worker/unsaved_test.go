package worker_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/worker"
)

// TestLockWaitKeepsTheExtraction: a job whose save waits for the user's
// lock (a forget's, held here) snoozes and, at its next run, stores what
// it extracted without asking the model again; the call's tokens, which
// could not be stored while the lock was held, are stored with the result,
// once. Before, every lock wait cost a model call. A turn alone and one
// of a conversation (extracted as a burst, workBurst) alike.
func TestLockWaitKeepsTheExtraction(t *testing.T) {
	for _, conversation := range []string{"", "c1"} {
		t.Run("conversation="+conversation, func(t *testing.T) { lockWaitKeepsTheExtraction(t, conversation) })
	}
}

func lockWaitKeepsTheExtraction(t *testing.T, conversation string) {
	e := setup(t)
	var (
		mu     sync.Mutex
		asked  int
		forget *blocker
	)
	llm := aliceModel(t, func(n int) *extractortest.Reply {
		mu.Lock()
		defer mu.Unlock()
		asked = n
		if n == 1 {
			// alice's user lock, held as a forget holds it, before the
			// save that follows this answer.
			forget = e.block(`SELECT pg_advisory_xact_lock(hashtextextended('memoryd.user.' || current_schema() || '.' || $1::text, 0))`, events.UserToken("alice"))
		}
		return nil
	})
	stop := e.start(llm, func(c *worker.Config) {
		c.MaxAttempts = 1
		// The save gives the lock up after 100 ms, not the default 5 s:
		// the test is about what a lock wait keeps, not how long it waits.
		// A job may then wait more than once before the test lets the
		// lock go, each a run that must not ask the model again; the
		// waits are bounded high so that a slow machine does not use them
		// up first.
		c.LockTimeout = 100 * time.Millisecond
		c.MaxLockWaits = 1000
		if conversation != "" {
			c.ExtractDebounce = time.Millisecond // a burst's job
		}
	})
	e.publish(events.Turn{ID: "t1", UserID: "alice", ConversationID: conversation, UserMessage: "My name is Alice."})
	e.waitFor("the job to wait for alice's lock", func() (bool, string) {
		jobs := e.extractJobs()
		if len(jobs) != 1 {
			return false, fmt.Sprintf("%d jobs", len(jobs))
		}
		var meta struct {
			Waits int `json:"memoryd_lock_waits"`
		}
		_ = json.Unmarshal(jobs[0].Metadata, &meta)
		return meta.Waits >= 1, string(jobs[0].Metadata)
	})
	mu.Lock()
	if err := forget.tx.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	mu.Unlock()
	if st := e.waitDone(1); st.TurnsProcessed != 1 {
		t.Fatalf("stats %+v, want the turn processed once the lock is free", st)
	}
	if name, err := e.store.Fact(e.ctx, "alice", "name"); err != nil || name.Value != "Alice" {
		t.Fatalf("alice's name = %+v, %v; want Alice", name, err)
	}
	alice, err := e.store.Stats(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if u := alice.LLMUsage["fake"]; asked != 1 || u.PromptTokens != 10 || u.CompletionTokens != 5 || u.Extractions != 1 {
		t.Fatalf("the model was asked %d times, alice's usage %+v; want one call, its 10 prompt and 5 completion tokens counted once", asked, alice.LLMUsage)
	}
	// The call also waited in the usage backlog, which the stop stores:
	// its id recorded with the save, it adds nothing.
	stop()
	if alice, err = e.store.Stats(e.ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if u := alice.LLMUsage["fake"]; u.PromptTokens != 10 || u.CompletionTokens != 5 || u.Extractions != 1 {
		t.Fatalf("after the stop stored the usage backlog, alice's usage %+v; want the one call's 10 prompt and 5 completion tokens counted once", alice.LLMUsage)
	}
}
