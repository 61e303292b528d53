package store_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
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

// ClaimJobs takes waiting jobs of the kind and queue that are not marked
// unclaimable, oldest first, up to the items asked for; the
// claimer alone finishes or releases them; a released job is never claimed
// again; a takeover of the claimer's process gives its claims back.
func TestClaimJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	ids := map[string]int64{}
	insert := func(name, kind, queue, state string, items, attempt int, metadata string, wait time.Duration) {
		t.Helper()
		list := make([]int, items)
		args, _ := json.Marshal(map[string]any{"items": list})
		var id int64
		err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, metadata, attempt, attempted_at, scheduled_at)
			VALUES ($1, $2, $3, $4::river_job_state, 5, $5::jsonb || jsonb_build_object('name', $6::text), $7::smallint,
			        CASE WHEN $7::smallint > 0 THEN now() END, now() + $8::interval)
			RETURNING id`, kind, args, queue, state, metadata, name, attempt, wait).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	insert("a", "k", "q", "available", 1, 0, `{}`, -time.Minute)
	insert("b", "k", "q", "available", 2, 0, `{}`, -time.Second)
	insert("unclaimable", "k", "q", "available", 1, 0, `{"memoryd_unclaimable": true}`, -time.Minute)
	insert("retried", "k", "q", "available", 1, 1, `{}`, -time.Minute)
	insert("other queue", "k", "q2", "available", 1, 0, `{}`, -time.Minute)
	insert("other kind", "k2", "q", "available", 1, 0, `{}`, -time.Minute)
	insert("later", "k", "q", "scheduled", 1, 0, `{}`, time.Hour)
	insert("running", "k", "q", "running", 1, 1, `{}`, -time.Minute)
	insert("big", "k", "q", "available", 5, 0, `{}`, 0)

	claim := func(claimer int64, max int) []string {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, store.JobClaim{Claimer: claimer, Kind: "k", Queue: "q", ItemsField: "items", MaxItems: max, Lease: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, j := range jobs {
			for n, id := range ids {
				if id == j.ID {
					names = append(names, n)
				}
			}
		}
		slices.Sort(names)
		return names
	}
	type row struct {
		state, claimedBy string
		unclaimable      bool
		leased           bool
	}
	get := func(name string) row {
		t.Helper()
		var r row
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, coalesce(metadata->>'memoryd_claimed_by', ''), metadata ? 'memoryd_unclaimable',
				scheduled_at > now() + interval '9 minutes' FROM river_job WHERE id = $1`, ids[name]).Scan(&r.state, &r.claimedBy, &r.unclaimable, &r.leased); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// 4 items: a, retried (a job that failed unmarked, waiting again)
	// and b, 4 in all; "big" does not fit after them.
	if got := claim(99, 4); !slices.Equal(got, []string{"a", "b", "retried"}) {
		t.Fatalf("claimer 99 took %v, want [a b retried]", got)
	}
	if r := get("a"); r != (row{state: "scheduled", claimedBy: "99", leased: true}) {
		t.Errorf("a claimed: %+v", r)
	}
	if got := claim(100, 10); !slices.Equal(got, []string{"big"}) {
		t.Fatalf("claimer 100 took %v, want [big]", got)
	}
	// The queue-depth gauge tells claimed jobs (being done) from
	// scheduled ones (waiting for their time).
	depth, err := s.QueueDepth(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if c, sc, av := depth[[2]string{"q", store.ClaimedState}], depth[[2]string{"q", "scheduled"}], depth[[2]string{"q", "available"}]; c != 4 || sc != 1 || av != 2 {
		t.Errorf("queue depth of q: %d claimed, %d scheduled, %d available; want 4 (a b retried big), 1 (later), 2 (unclaimable other-kind)", c, sc, av)
	}
	if n, err := s.FinishClaimed(ctx, 99, []int64{ids["a"], ids["b"], ids["big"]}); err != nil || n != 2 {
		t.Fatalf("claimer 99 finished %d (%v), want its 2", n, err)
	}
	if r := get("b"); r.state != "completed" || r.claimedBy != "99" {
		t.Errorf("b finished: %+v", r)
	}
	// A job that arrives while big is claimed (on a queue of its own, out
	// of the claims below).
	insert("newer", "k", "q3", "available", 1, 0, `{}`, 0)
	if n, err := s.ReleaseClaimed(ctx, 100, []int64{ids["big"], ids["a"]}, store.UnclaimableKey, 0); err != nil || n != 1 {
		t.Fatalf("claimer 100 released %d (%v), want its 1", n, err)
	}
	// Released, big keeps its place in River's fetch order (priority,
	// scheduled_at, id) ahead of the newer job, rather than going behind
	// every job that came while it was claimed.
	var ahead bool
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT scheduled_at FROM river_job WHERE id = $1) < (SELECT scheduled_at FROM river_job WHERE id = $2)`,
		ids["big"], ids["newer"]).Scan(&ahead); err != nil || !ahead {
		t.Errorf("released big is behind a job that came while it was claimed (%v)", err)
	}
	if r := get("big"); r != (row{state: "available", unclaimable: true}) {
		t.Errorf("big released: %+v", r)
	}
	if n, err := s.FinishClaimed(ctx, 100, []int64{ids["big"]}); err != nil || n != 0 {
		t.Errorf("claimer 100 finished %d (%v) after releasing, want 0", n, err)
	}
	if got := claim(101, 10); len(got) != 0 {
		t.Errorf("claimer 101 took %v, want nothing (claimed, released, other queue or kind, later, running)", got)
	}

	// A claimer's process dies: its takeover gives the claimed jobs back.
	insert("claimer", "k", "q", "running", 1, 1, `{}`, -time.Minute)
	if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET attempted_by = ARRAY['dead-proc'] WHERE id = $1`, ids["claimer"]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, started_at, heartbeat_at) VALUES ('dead-proc', now() - interval '1 hour', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	insert("c", "k", "q", "available", 1, 0, `{}`, -time.Minute)
	if got := claim(ids["claimer"], 10); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("the dying claimer took %v, want [c]", got)
	}
	var taken []store.TakenJob
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		var err error
		taken, err = q.TakeOverJobs(ctx, time.Minute)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The caller learns that the claimer held claims: its replacement
	// runs alone, like them.
	if len(taken) != 1 || taken[0].ID != ids["claimer"] || !taken[0].Claimed {
		t.Errorf("taken over %+v, want the claimer, with Claimed", taken)
	}
	if r := get("c"); r != (row{state: "available", unclaimable: true}) {
		t.Errorf("c after its claimer's takeover: %+v", r)
	}
}
