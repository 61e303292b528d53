package store_test

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// testJobs is a job shape with other names than the worker's, so that the
// store is seen to read only what it is given.
var testJobs = store.RiverJobs{Kind: "test_extract", UserField: "owner", EventIDsField: "turn_ids"}

// TestForgetDeletesTheJobsNamingTheUser: forget deletes the user's jobs in any
// state (running included), strips the user's ids from a legacy job of
// several users (empty user field) or deletes it when nothing else is left,
// and leaves other users' jobs and jobs of other kinds alone, even when they
// name an event id the user has too.
func TestForgetDeletesTheJobsNamingTheUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "a1", UserID: "alice", UserMessage: "m", TurnAt: at},
		{EventID: "a2", UserID: "alice", UserMessage: "m", TurnAt: at},
		{EventID: "a1", UserID: "bob", UserMessage: "m", TurnAt: at},
	}); err != nil {
		t.Fatal(err)
	}
	insert := func(name, kind, state, args string) {
		t.Helper()
		_, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, metadata, attempt, attempted_at, finalized_at)
			VALUES ($1, $2, 'extract', $3::river_job_state, 5, jsonb_build_object('name', $4::text),
			        CASE WHEN $3 = 'available' THEN 0 ELSE 1 END, CASE WHEN $3 = 'available' THEN NULL ELSE now() END,
			        CASE WHEN $3 = 'completed' THEN now() END)`, kind, args, state, name)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("alice", "test_extract", "available", `{"owner": "alice", "turn_ids": ["a1"]}`)
	insert("alice running", "test_extract", "running", `{"owner": "alice", "turn_ids": ["a2"]}`)
	insert("alice completed", "test_extract", "completed", `{"owner": "alice", "turn_ids": ["a1", "a2"]}`)
	insert("legacy mixed", "test_extract", "available", `{"owner": "", "turn_ids": ["a2", "c1", "a1"]}`)
	insert("legacy alice only", "test_extract", "available", `{"owner": "", "turn_ids": ["a1", "a2"]}`)
	insert("bob", "test_extract", "available", `{"owner": "bob", "turn_ids": ["a1"]}`)
	insert("other kind", "test_other", "available", `{"owner": "alice", "turn_ids": ["a1"]}`)

	removed, _, err := s.ForgetUser(ctx, "alice", "alice-token", store.StreamPosition{}, testJobs)
	if err != nil {
		t.Fatal(err)
	}
	if removed.Jobs != 4 {
		t.Errorf("removed %d jobs, want 4 (three of alice's, the legacy job of hers only)", removed.Jobs)
	}
	rows, err := s.Pool().Query(ctx, `SELECT metadata->>'name', args FROM river_job`)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]string{}
	for rows.Next() {
		var (
			name string
			args json.RawMessage
		)
		if err := rows.Scan(&name, &args); err != nil {
			t.Fatal(err)
		}
		var a struct {
			IDs []string `json:"turn_ids"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			t.Fatal(err)
		}
		left[name] = string(mustJSON(t, a.IDs))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"legacy mixed": `["c1"]`, "bob": `["a1"]`, "other kind": `["a1"]`}
	if !maps.Equal(left, want) {
		t.Errorf("jobs left = %v, want %v", left, want)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// OrphanedTurns locks the turns it returns until the caller's transaction
// ends (so that a forget waits for the job the reconciler inserts for them)
// and skips turns another transaction holds.
func TestOrphanedTurnsLocksWhatItReturns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "a1", UserID: "alice", UserMessage: "m", TurnAt: at},
		{EventID: "b1", UserID: "bob", UserMessage: "m", TurnAt: at},
	}); err != nil {
		t.Fatal(err)
	}
	held, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'bob' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		orphans, err := q.OrphanedTurns(ctx, testJobs, 10)
		if err != nil {
			return err
		}
		if len(orphans) != 1 || orphans[0].UserID != "alice" {
			t.Errorf("orphans %+v; want alice's turn only (bob's is held)", orphans)
		}
		// Another transaction cannot take alice's turn now.
		other, err := s.Pool().Begin(ctx)
		if err != nil {
			return err
		}
		defer other.Rollback(ctx)
		if _, err := other.Exec(ctx, `SELECT 1 FROM turns WHERE user_id = 'alice' FOR UPDATE NOWAIT`); err == nil {
			t.Error("alice's orphaned turn is not locked by the transaction that found it")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
