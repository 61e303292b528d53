package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestJobsWaiting: a job waits for the server when its last snooze was
// for it, whatever it waited for before. Before, any job not done with a
// wait for the server counted (a counter above 0): one snoozed for the
// database since, or retrying an attempt spent on a 500, made a process
// starting beside it hold its first requests back as in an outage going
// on.
func TestJobsWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	insert := func(kind, state, metadata string, in time.Duration) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, metadata)
			VALUES ($1, '{}', 'q', $2::river_job_state, 5, now() + $3::interval, $4::jsonb)`, kind, state, in, metadata); err != nil {
			t.Fatal(err)
		}
	}
	// Waited for the server before, waiting for another reason now.
	insert("forDB", "scheduled", `{"waits": 2, "snoozed_for": "db_unreachable"}`, time.Minute)
	insert("retrying", "retryable", `{"waits": 2}`, 10*time.Second)
	insert("rateLimited", "scheduled", `{"waits": 1, "snoozed_for": "rate_limited"}`, 30*time.Second)
	// Waiting for it: snoozed, woken (available), running.
	insert("snoozed", "scheduled", `{"waits": 2, "snoozed_for": "model_unreachable"}`, time.Minute)
	insert("woken", "available", `{"waits": 2, "snoozed_for": "model_unreachable"}`, 0)
	insert("running", "running", `{"waits": 1, "snoozed_for": "model_unreachable"}`, -time.Second)
	// Long past: not lately.
	insert("old", "scheduled", `{"waits": 2, "snoozed_for": "model_unreachable"}`, -time.Hour)
	for kind, want := range map[string]bool{"forDB": false, "retrying": false, "rateLimited": false,
		"snoozed": true, "woken": true, "running": true, "old": false, "none": false} {
		got, err := s.JobsWaiting(ctx, store.RiverJobs{Kind: kind}, "snoozed_for", "model_unreachable", 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: waiting %v, want %v", kind, got, want)
		}
	}
}
