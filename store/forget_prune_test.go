package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// TestForgetBesidePrune: a forget of a user and a prune deleting one of
// that user's items at once both succeed, neither a deadlock victim. A
// forget deletes the user's context_terms before the items; a prune locks
// an item, then its delete trigger deletes the item's terms: taken in
// opposite orders, the forget waited for the item the prune held while
// the prune waited for the terms the forget had deleted (a review).
func TestForgetBesidePrune(t *testing.T) {
	ctx, s := setup(t)
	var w []store.ContextWrite
	for i := range 20 {
		w = append(w, store.ContextWrite{UserID: "ana", Question: fmt.Sprintf("What is Ana's pet number %d called?", i), Answer: fmt.Sprintf("Pet %d", i),
			EventID: fmt.Sprintf("e%d", i), CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := s.InsertContext(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SetFact(ctx, "ana", "name", "Ana"); err != nil {
		t.Fatal(err)
	}
	// Hold the forget between its first statements and its delete of the
	// items: a transaction holding the user's fact (deleted just before).
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT FROM facts WHERE user_id = 'ana' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// hold's backend: the forget waits for it. Not any wait of the
	// database's: other tests' schemas are in it, and their forgets
	// delete facts too.
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	waiting := func(like string) {
		t.Helper()
		eventstest.Eventually(t, "a wait for the held fact in "+like, 30*time.Second, func() (bool, string) {
			var n int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE $2`, holder, like).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n > 0, fmt.Sprint(n, " waiting")
		})
	}
	forgot := make(chan error, 1)
	go func() {
		_, _, err := s.ForgetUser(context.Background(), "ana", "ana", store.StreamPosition{})
		forgot <- err
	}()
	waiting("%DELETE FROM facts%")
	pruned := make(chan error, 1)
	go func() {
		_, err := s.DeleteOldestContext(context.Background(), 1)
		pruned <- err
	}()
	// The prune either holds the oldest item and waits for the forget (a
	// backend blocked by the one hold blocks), or is done: either way the
	// two have met before hold lets the forget go on.
	eventstest.Eventually(t, "the prune done or waiting for the forget", 30*time.Second, func() (bool, string) {
		select {
		case err := <-pruned:
			pruned <- err
			return true, ""
		default:
		}
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity w WHERE EXISTS (
			SELECT FROM pg_stat_activity f WHERE $1 = ANY(pg_blocking_pids(f.pid)) AND f.pid = ANY(pg_blocking_pids(w.pid)))`, holder).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0, fmt.Sprint(n, " waiting for the forget")
	})
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Errorf("forget: %v", err)
	}
	if err := <-pruned; err != nil {
		t.Errorf("prune: %v", err)
	}
}
