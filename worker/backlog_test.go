package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
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
// every other user's memory waited behind the whole flood. A negative
// BacklogTurns keeps every job in order of arrival.
func TestFloodingUserDoesNotDelayOthersExtraction(t *testing.T) {
	for _, tt := range []struct {
		name           string
		backlog, flood int
		// The flood's jobs enqueued before its backlog reached BacklogTurns
		// keep the default priority, and one is running when bob's
		// arrives: bob is at most backlog+1th; off, he is last.
		maxAt int
	}{
		{"on", 5, 30, 6},
		{"off", -1, 10, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			ext := &orderExtractor{Extractor: extractor.NewRules(), release: make(chan struct{})}
			logs := new(eventstest.SyncBuffer)
			e.start(ext, func(c *worker.Config) {
				c.Workers, c.BacklogTurns = 1, tt.backlog
				c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})
			for i := range tt.flood {
				e.publish(events.Turn{ID: fmt.Sprintf("f-%d", i), UserID: "flood", UserMessage: fmt.Sprintf("flood message %d", i)})
			}
			e.waitFor("the flood recorded", func() (bool, string) {
				st, err := e.store.Stats(e.ctx, "flood")
				return err == nil && st.TurnsReceived == int64(tt.flood), fmt.Sprint(st.TurnsReceived, err)
			})
			e.publish(events.Turn{ID: "b-1", UserID: "bob", UserMessage: "I live in Lisbon."})
			e.waitFor("bob's turn recorded", func() (bool, string) {
				st, err := e.store.Stats(e.ctx, "bob")
				return err == nil && st.TurnsReceived == 1, fmt.Sprint(st.TurnsReceived, err)
			})
			close(ext.release)
			e.waitDone(int64(tt.flood + 1))
			ext.mu.Lock()
			defer ext.mu.Unlock()
			i := slices.Index(ext.users, "bob")
			if i < 0 || i > tt.maxAt || (tt.backlog < 0 && i != tt.flood) {
				t.Fatalf("bob's turn extracted at position %d of %d, want at most %d: %v", i, len(ext.users), tt.maxAt, ext.users)
			}
			// The operator is told who floods, once (not once a batch).
			want := 0
			if tt.backlog > 0 {
				want = 1
			}
			if n := strings.Count(logs.String(), `"user_id":"flood"`); n != want || strings.Contains(logs.String(), `"user_id":"bob"`) {
				t.Errorf("%d log lines of flood's backlog, want %d, and none of bob's:\n%s", n, want, logs.String())
			}
		})
	}
}
