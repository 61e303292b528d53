package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
)

// TestDirectFactWrittenAfterReceived: a facts.set's source_at is when
// memoryd received it, its updated_at when memoryd wrote it, so a set that
// waited for the user's locks (a burst of extraction beside it) is written
// no earlier than it was received. updated_at was the transaction's start,
// before the wait, and a walk saw it 3-80 ms before source_at.
func TestDirectFactWrittenAfterReceived(t *testing.T) {
	for _, list := range []bool{false, true} {
		t.Run(fmt.Sprintf("list=%v", list), func(t *testing.T) {
			ctx, s := setup(t)
			conn, err := s.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			// The user's clear lock, which every fact write takes shared.
			const lock = `hashtext('memoryd.clear.' || current_schema()), hashtext('alice')`
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lock+`)`); err != nil {
				t.Fatal(err)
			}
			unlocked := false
			unlock := func() {
				if !unlocked {
					unlocked = true
					if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock(`+lock+`)`); err != nil {
						t.Error(err)
					}
				}
			}
			defer unlock()
			type result struct {
				sourceAt, updatedAt time.Time
				err                 error
			}
			done := make(chan result, 1)
			go func() {
				if list {
					f, _, err := s.SetFactValues(ctx, "alice", "likes", []string{"chess"})
					done <- result{f.SourceAt, f.UpdatedAt, err}
					return
				}
				f, _, err := s.SetFact(ctx, "alice", "location", "Paris")
				done <- result{f.SourceAt, f.UpdatedAt, err}
			}()
			var began time.Time
			eventstest.Eventually(t, "the set to wait for the user's clear lock", 30*time.Second, func() (bool, string) {
				var n int
				err := s.Pool().QueryRow(ctx, `SELECT count(*), max(a.xact_start) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
					WHERE l.locktype = 'advisory' AND NOT l.granted
					  AND l.classid = hashtext('memoryd.clear.' || current_schema())::oid AND l.objid = hashtext('alice')::oid`).Scan(&n, &began)
				return err == nil && n == 1, fmt.Sprintf("%d waiting, %v", n, err)
			})
			// Hold the set until Postgres's clock has moved past the start
			// of its transaction by more than the clock reading's error.
			eventstest.Eventually(t, "postgres's clock to pass the set's start", 30*time.Second, func() (bool, string) {
				var past bool
				err := s.Pool().QueryRow(ctx, `SELECT clock_timestamp() > $1::timestamptz + interval '5 ms'`, began).Scan(&past)
				return err == nil && past, fmt.Sprint(err)
			})
			unlock()
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.updatedAt.Before(r.sourceAt) {
				t.Errorf("updated_at %s is %s before source_at %s: a write before it was received",
					r.updatedAt.Format(time.RFC3339Nano), r.sourceAt.Sub(r.updatedAt), r.sourceAt.Format(time.RFC3339Nano))
			}
			if r.updatedAt.Before(began) {
				t.Errorf("updated_at %s before the set's transaction began %s", r.updatedAt, began)
			}
		})
	}
}
