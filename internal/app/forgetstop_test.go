package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
)

// TestStopCancelsAForgetPastItsDeadline: a forget whose transaction
// committed and whose document deletion runs on past the request's own
// deadline (ForgetTimeout) still ends at Stop's deadline, through the
// enrich service's Halted context (worker.WithStop): the request's context,
// past its deadline, no longer carries a cancel. Without that wiring the
// forget holds its connection for forgetDocsTimeout (10 minutes) and Stop
// blocks closing the pool. TestStopCancelsAForgetInProgress cancels forgets
// before their deadline only, where the request's cancel alone ends them.
func TestStopCancelsAForgetPastItsDeadline(t *testing.T) {
	t.Parallel()
	const forgetTimeout = 2 * time.Second
	a := startTestApp(t, func(c *Config) { c.Enricher.ForgetTimeout = forgetTimeout })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	publishAndWait(t, a, "alice", events.Turn{ID: "t1", UserID: "alice", UserMessage: "my dog is Rex", AssistantResponse: "ok", Timestamp: time.Now().UTC()})
	other, tx, pid := blockerWithADocument(t, ctx, a)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM collections WHERE owner_kind = 'user' AND owner = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	errc := forgetWaitingOn(t, ctx, a, other, pid, "SELECT id FROM collections WHERE owner_kind = 'user' AND owner = $1%FOR UPDATE")
	// The condition under test is the request's own deadline having
	// passed: wait it out.
	<-time.After(time.Until(sent.Add(forgetTimeout + 500*time.Millisecond)))
	stopCtx, stopCancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stopCancel()
	stopped := make(chan error, 1)
	go func() { stopped <- a.Stop(stopCtx) }()
	select {
	case err := <-stopped:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop during a forget past its deadline: %v, want its deadline passed", err)
		}
	case <-ctx.Done():
		// Release the forget so that the test's cleanups can end.
		_ = tx.Rollback(context.Background())
		t.Fatal("Stop did not return: the forget past its own deadline was not ended at Stop's deadline")
	}
	err := <-errc
	var se *events.ServiceError
	if !errors.As(err, &se) || se.Code != 500 || !strings.Contains(se.Description, "deleting their documents did not finish") {
		t.Fatalf("forget cancelled by stop past its deadline: %v; want a 500 saying its documents were left", err)
	}
}
