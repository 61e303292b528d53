package worker

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestRequeueRetriesADeadlock: a replay batch that Postgres picks as the
// victim of a deadlock (here with a transaction locking the same turns in
// the other order, as an ingest inserting them could) is run again, not
// failed: the chaos test saw `replay` exit 1 on "requeue turns: deadlock
// detected".
func TestRequeueRetriesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t) // a schema of its own: pg_locks is read for its turns table only
	enq, err := NewEnqueuer(EnqueuerConfig{Store: s, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	turns := []store.Turn{
		{EventID: "a", UserID: "u", UserMessage: "first", TurnAt: at},
		{EventID: "b", UserID: "u", UserMessage: "second", TurnAt: at.Add(time.Minute)},
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	other, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	// Postgres checks for a deadlock after deadlock_timeout (1 s) of
	// waiting, and the first to check is the victim. The replay starts
	// waiting first, but on a loaded machine this side could still check
	// first (a CI run): it waits far longer before it checks.
	if _, err := other.Exec(ctx, `SET LOCAL deadlock_timeout = '30s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'u' AND event_id = 'b' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, _, err := requeue(ctx, s, enq, turns, 10, time.Time{})
		done <- err
	}()
	// The replay holds a and waits for b.
	eventstest.Eventually(t, "the replay waiting on a turn's row", time.Minute, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks w JOIN pg_locks r ON r.pid = w.pid
			WHERE NOT w.granted AND w.locktype = 'transactionid' AND r.locktype = 'tuple' AND r.relation = 'turns'::regclass`).Scan(&n)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
	// The replay finds the cycle (this side would only look after 30 s):
	// it is the victim.
	if _, err := other.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'u' AND event_id = 'a' FOR UPDATE`); err != nil {
		t.Fatalf("the other transaction was the deadlock's victim, not the replay (the test needs the replay's): %v", err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("replay batch after a deadlock: %v", err)
	}
}
