package enricher_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestDirectWriteWaitsForAForgetInProgress: facts.set and store beside a
// forget of the same user are serialised by the user's forget lock. While a
// forget is in progress (here held inside its transaction by a turn row the
// test keeps locked), a facts.set waits for it and then writes the first
// fact of the user's new memory. Before, the write went ahead inside the
// forget, and one committing between the forget's deletes and its commit
// survived a forget that answered ok.
func TestDirectWriteWaitsForAForgetInProgress(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	ctx := ctxT(t)
	if _, err := st.InsertTurns(ctx, []store.Turn{{EventID: "e1", UserID: "alice", UserMessage: "hi", TurnAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	hold, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(context.Background()) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() {
		_, _, err := st.ForgetUser(context.Background(), "alice", events.UserToken("alice"), store.StreamPosition{}, store.RiverJobs{})
		forgot <- err
	}()
	waiting := func(locktype string) bool {
		t.Helper()
		var n int
		if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = $1`, locktype).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		eventstest.Eventually(t, what, 30*time.Second, func() (bool, string) { return cond(), "" })
	}
	until("the forget to wait for the held turn", func() bool { return waiting("transactionid") })

	set := make(chan error, 1)
	go func() {
		_, err := h.client.SetFact(context.Background(), "alice", "city", "Paris")
		set <- err
	}()
	until("facts.set to wait for the forget, or answer", func() bool {
		select {
		case err := <-set:
			t.Fatalf("facts.set answered (%v) while the forget of the same user was in progress", err)
		default:
		}
		return waiting("advisory")
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil {
		t.Fatal(err)
	}
	// Written after the forget: the new memory's first fact.
	if f, err := st.Fact(ctx, "alice", "city"); err != nil || f.Value != "Paris" {
		t.Fatalf("fact after the forget = %+v, %v; want city=Paris written after it", f, err)
	}
}
