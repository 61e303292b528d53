package worker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/worker"
)

// orderExtractor records the users whose turns it extracts, in order, and
// holds the first extraction until release is closed.
type orderExtractor struct {
	worker.Extractor
	release chan struct{}
	mu      sync.Mutex
	users   []string
}

func (o *orderExtractor) Extract(ctx context.Context, in extractor.Input) (extractor.Result, error) {
	o.mu.Lock()
	first := len(o.users) == 0
	o.users = append(o.users, in.UserID)
	o.mu.Unlock()
	if first {
		select {
		case <-o.release:
		case <-ctx.Done():
			return extractor.Result{}, ctx.Err()
		}
	}
	return o.Extractor.Extract(ctx, in)
}

// TestFloodingUserDoesNotDelayOthersExtraction: a user whose frontend
// publishes a flood of turns (a noisy neighbour) has their extraction jobs
// run after the other users' waiting jobs, not before every one of them.
// Before (one River priority, jobs in order of arrival): bob's one turn,
// published after 30 of flood's, was extracted 31st, so with a slow model
// every other user's memory waited behind the whole flood.
func TestFloodingUserDoesNotDelayOthersExtraction(t *testing.T) {
	e := setup(t)
	const backlog, flood = 5, 30
	ext := &orderExtractor{Extractor: extractor.NewRules(), release: make(chan struct{})}
	e.start(ext, func(c *worker.Config) { c.Workers = 1; c.BacklogTurns = backlog })
	for i := range flood {
		e.publish(events.Turn{ID: fmt.Sprintf("f-%d", i), UserID: "flood", UserMessage: fmt.Sprintf("flood message %d", i)})
	}
	e.waitFor("the flood recorded", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "flood")
		return err == nil && st.TurnsReceived == flood, fmt.Sprint(st.TurnsReceived, err)
	})
	e.publish(events.Turn{ID: "b-1", UserID: "bob", UserMessage: "I live in Lisbon."})
	e.waitFor("bob's turn recorded", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "bob")
		return err == nil && st.TurnsReceived == 1, fmt.Sprint(st.TurnsReceived, err)
	})
	close(ext.release)
	e.waitDone(flood + 1)
	ext.mu.Lock()
	defer ext.mu.Unlock()
	// The flood's jobs enqueued before its backlog reached `backlog` keep
	// the default priority, and one is running when bob's arrives.
	if i := slices.Index(ext.users, "bob"); i < 0 || i > backlog+1 {
		t.Fatalf("bob's turn extracted at position %d of %d, want at most %d: %v", i, len(ext.users), backlog+1, ext.users)
	}
}

// TestBacklogPriorityOff: a negative BacklogTurns keeps every job in order
// of arrival.
func TestBacklogPriorityOff(t *testing.T) {
	e := setup(t)
	const flood = 10
	ext := &orderExtractor{Extractor: extractor.NewRules(), release: make(chan struct{})}
	e.start(ext, func(c *worker.Config) { c.Workers = 1; c.BacklogTurns = -1 })
	for i := range flood {
		e.publish(events.Turn{ID: fmt.Sprintf("f-%d", i), UserID: "flood", UserMessage: fmt.Sprintf("flood message %d", i)})
	}
	e.waitFor("the flood recorded", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "flood")
		return err == nil && st.TurnsReceived == flood, fmt.Sprint(st.TurnsReceived, err)
	})
	e.publish(events.Turn{ID: "b-1", UserID: "bob", UserMessage: "I live in Lisbon."})
	e.waitFor("bob's turn recorded", func() (bool, string) {
		st, err := e.store.Stats(e.ctx, "bob")
		return err == nil && st.TurnsReceived == 1, fmt.Sprint(st.TurnsReceived, err)
	})
	close(ext.release)
	e.waitDone(flood + 1)
	ext.mu.Lock()
	defer ext.mu.Unlock()
	if i := slices.Index(ext.users, "bob"); i != flood {
		t.Fatalf("bob's turn extracted at position %d, want %d (last): %v", i, flood, ext.users)
	}
}
