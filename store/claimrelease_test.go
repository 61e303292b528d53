package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// ReleaseClaimed gives back, marked or not, at once or after a delay,
// the listed jobs or every one the claimer holds, and skips a row another
// transaction holds; a takeover gives back the claims of a claimer whose
// row a forget deleted.
func TestReleaseClaimedAndForgottenClaimers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	insert := func(user, state string, attemptedBy string) int64 {
		t.Helper()
		var id int64
		if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, attempt, attempted_at, attempted_by)
			VALUES ('k', jsonb_build_object('user_id', $1::text, 'context_ids', '[1]'::jsonb), 'q', $2::river_job_state, 5,
			        CASE WHEN $3 <> '' THEN 1 ELSE 0 END, CASE WHEN $3 <> '' THEN now() END, CASE WHEN $3 <> '' THEN ARRAY[$3] END)
			RETURNING id`, user, state, attemptedBy).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	claim := func(claimer int64) []int64 {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, store.JobClaim{Claimer: claimer, Kind: "k", Queue: "q", ItemsField: "context_ids", MaxItems: 10, Lease: 11 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		return ids
	}
	type row struct {
		state       string
		claimed     bool
		unclaimable bool
		later       bool
	}
	get := func(id int64) row {
		t.Helper()
		var r row
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, metadata ? $2, metadata ? $3, scheduled_at > now() + interval '5 seconds'
			FROM river_job WHERE id = $1`, id, store.ClaimedByKey, store.UnclaimableKey).Scan(&r.state, &r.claimed, &r.unclaimable, &r.later); err != nil {
			t.Fatal(err)
		}
		return r
	}

	a, b, c := insert("a", "available", ""), insert("b", "available", ""), insert("c", "available", "")
	if got := claim(1000); len(got) != 3 {
		t.Fatalf("claimed %v", got)
	}
	// c's row is held by a forget in flight: skipped, not waited for.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM river_job WHERE id = $1`, c); err != nil {
		t.Fatal(err)
	}
	// Were the held row waited for, the releases would still be waiting
	// when the deadline ends them (the forget commits below, after them).
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := s.ReleaseClaimed(rctx, 1000, []int64{a}, "", 0); err != nil || n != 1 {
		t.Fatalf("released %d (%v), want a", n, err)
	}
	if n, err := s.ReleaseClaimed(rctx, 1000, nil, "", time.Minute); err == nil || !strings.Contains(err.Error(), "1 held by another transaction") || n != 1 {
		t.Fatalf("released %d (%v), want b, and an error naming c, held", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := get(a); r != (row{state: "available"}) {
		t.Errorf("a released at once, claimable again: %+v", r)
	}
	if r := get(b); r != (row{state: "scheduled", later: true}) {
		t.Errorf("b released after a minute: %+v", r)
	}

	// A claimer in a dead process whose row its user's forget deleted.
	claimer := insert("alice", "running", "dead-proc")
	d := insert("d", "available", "")
	if got := claim(claimer); len(got) != 2 { // a and d
		t.Fatalf("claimed %v", got)
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM river_job WHERE id = $1`, claimer); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, started_at, heartbeat_at) VALUES ('dead-proc', now() - interval '1 hour', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		_, err := q.TakeOverJobs(ctx, time.Minute)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r := get(d); r != (row{state: "available", unclaimable: true}) {
		t.Errorf("d after the takeover, its claimer's row gone: %+v", r)
	}
}

// A release for a moment leaves the jobs available, due after the delay,
// as River leaves its own short snoozes: neither a claim nor River's fetch
// takes them before it, and they need no pass of River's scheduler, which
// makes scheduled jobs available every 5 s (an excused batch's jobs, to
// wait 10 ms, waited up to 5 s). A longer delay schedules them.
func TestReleaseClaimedForAMomentNeedsNoScheduler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var ids []int64
	for _, user := range []string{"a", "b"} {
		var id int64
		if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts)
			VALUES ('k', jsonb_build_object('user_id', $1::text, 'context_ids', '[1]'::jsonb), 'q', 'available', 5)
			RETURNING id`, user).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	claim := func() int {
		t.Helper()
		jobs, err := s.ClaimJobs(ctx, store.JobClaim{Claimer: 1000, Kind: "k", Queue: "q", ItemsField: "context_ids", MaxItems: 10, Lease: 11 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	if n := claim(); n != 2 {
		t.Fatalf("claimed %d jobs, want 2", n)
	}
	if n, err := s.ReleaseClaimed(ctx, 1000, ids[:1], "", time.Minute); err != nil || n != 1 {
		t.Fatalf("released %d (%v), want 1", n, err)
	}
	if n, err := s.ReleaseClaimed(ctx, 1000, ids[1:], "", 2*time.Second); err != nil || n != 1 {
		t.Fatalf("released %d (%v), want 1", n, err)
	}
	for i, want := range []string{"scheduled", "available"} {
		var (
			state string
			later bool
		)
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, scheduled_at > now() FROM river_job WHERE id = $1`, ids[i]).Scan(&state, &later); err != nil {
			t.Fatal(err)
		}
		if state != want || !later {
			t.Errorf("job released for %s: %s, due later %v; want %s, due later", []string{"a minute", "2 s"}[i], state, later, want)
		}
	}
	if n := claim(); n != 0 {
		t.Errorf("claimed %d jobs released for a while, before it passed", n)
	}
}

// A claimed row held for a moment (River's fetch, or another claim, that
// read it as available before the claim and locked it to recheck) is
// released once the moment ends: the release passes again. Done once, it
// left the job claimed until its lease ended (the worker's outage test
// caught 14 jobs claimed for 9 more minutes).
func TestReleaseClaimedPassesAgainOverARowHeldForAMoment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	var ids []int64
	for _, u := range []string{"a", "b"} {
		var id int64
		if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts)
			VALUES ('k', jsonb_build_object('user_id', $1::text, 'context_ids', '[1]'::jsonb), 'q', 'available', 5) RETURNING id`, u).Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if jobs, err := s.ClaimJobs(ctx, store.JobClaim{Claimer: 7, Kind: "k", Queue: "q", ItemsField: "context_ids", MaxItems: 10, Lease: 10 * time.Minute}); err != nil || len(jobs) != 2 {
		t.Fatalf("claimed %d (%v), want 2", len(jobs), err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids[1]); err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.ReleaseClaimed(ctx, 7, nil, "", 0)
		done <- result{n, err}
	}()
	// The first pass released the free row; then the moment ends.
	eventstest.Eventually(t, "the free row released", time.Minute, func() (bool, string) {
		var st string
		err := s.Pool().QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, ids[0]).Scan(&st)
		return err == nil && st == "available", fmt.Sprint(st, err)
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.n != 2 {
		t.Fatalf("released %d (%v), want both", r.n, r.err)
	}
}

// AvailableSoon makes jobs scheduled within River's scheduler interval
// available, keeping their scheduled_at (so neither River's fetch nor a
// claim takes them early); a job due later stays scheduled, and a job in
// another state is left alone.
func TestAvailableSoon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	insert := func(state string, in time.Duration) int64 {
		t.Helper()
		var id int64
		if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at)
			VALUES ('k', jsonb_build_object('context_ids', '[1]'::jsonb), 'q', $1::river_job_state, 5, now() + $2::interval) RETURNING id`,
			state, in).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	soon, later, running := insert("scheduled", 2*time.Second), insert("scheduled", time.Minute), insert("running", time.Second)
	n, err := s.AvailableSoon(ctx, []int64{soon, later, running})
	if err != nil || n != 1 {
		t.Fatalf("AvailableSoon changed %d (%v), want 1", n, err)
	}
	for id, want := range map[int64]string{soon: "available", later: "scheduled", running: "running"} {
		var state string
		var future bool
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, scheduled_at > now() FROM river_job WHERE id = $1`, id).Scan(&state, &future); err != nil {
			t.Fatal(err)
		}
		if state != want || !future {
			t.Errorf("job %d: %s, due later %v; want %s, still due later", id, state, future, want)
		}
	}
	if jobs, err := s.ClaimJobs(ctx, store.JobClaim{Claimer: 1, Kind: "k", Queue: "q", ItemsField: "context_ids", MaxItems: 10, Lease: time.Minute}); err != nil || len(jobs) != 0 {
		t.Errorf("claimed %d (%v) before the job was due", len(jobs), err)
	}
	// The queue gauge counts it as waiting for its time, not as work
	// waiting for a worker (a debounce read as a backlog).
	depth, err := s.QueueDepth(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if sc, av := depth[[2]string{"q", "scheduled"}], depth[[2]string{"q", "available"}]; sc != 2 || av != 0 {
		t.Errorf("queue depth of q: %d scheduled, %d available; want 2 (soon, later), 0", sc, av)
	}
}

// TestWakeWaiting: the jobs of the kind waiting after a snooze of the
// reason are made available now and marked woken, those snoozed for
// another reason, of another kind, due already, running, or locked by
// another transaction, or claimed (store.ClaimedByKey) are left as they
// were. A woken job's counted snooze is credited with what of its counted
// length was not waited (since its run began; for a job never run, the
// part of the snooze left), once, at most its length.
func TestWakeWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	insert := waitingJobs(t, s)
	const model = `{"snoozed_for": "model_unreachable", "waits": 3}`
	var (
		waiting     = insert("extract", "scheduled", model, time.Minute)
		waitingSoon = insert("extract", "available", model, 2*time.Second) // a short snooze River left available
		forDB       = insert("extract", "scheduled", `{"snoozed_for": "db_unreachable"}`, time.Minute)
		otherKind   = insert("embed", "scheduled", model, time.Minute)
		due         = insert("extract", "available", model, -time.Second)
		running     = insert("extract", "running", model, -time.Second)
		locked      = insert("extract", "scheduled", model, time.Minute)
		// Counted snoozes of 60 s, with 5 s credited before: the part cut
		// short is added. One whose scheduled_at is past its length (a
		// snoozer's clock ahead) is credited its length, no more.
		counted    = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wait_ms": 60000, "unwaited_ms": 5000}`, time.Minute)
		clockAhead = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wait_ms": 20000}`, time.Minute)
		notANumber = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wait_ms": "x"}`, time.Minute)
		// Woken as often as it may be: left to its snooze; once less: woken.
		wokenEnough = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wakes": 5, "wait_ms": 60000}`, time.Minute)
		wokenOnce   = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wakes": 4, "wait_ms": 60000}`, time.Minute)
		// A counted snooze of 60 s that its spread shortened to 50 s,
		// decided by a run begun 10 s ago: not waited is the 60 s less
		// the 10 s, not the 40 s left of the snooze.
		spread = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "wait_ms": 60000}`, 40*time.Second)
		// Claimed by an embed job, its last snooze's reason still there:
		// left to its claimer; a claim that is over (null): woken.
		claimed   = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "`+store.ClaimedByKey+`": 7}`, time.Minute)
		claimOver = insert("extract", "scheduled", `{"snoozed_for": "model_unreachable", "`+store.ClaimedByKey+`": null}`, time.Minute)
	)
	if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET attempted_at = now() - interval '10 seconds' WHERE id = $1`, spread); err != nil {
		t.Fatal(err)
	}
	lockJobRow(t, s, locked)
	var leftBefore int64 // of the counted snooze, in milliseconds, just before the wake
	if err := s.Pool().QueryRow(ctx, `SELECT floor(extract(epoch FROM scheduled_at - now()) * 1000)::bigint FROM river_job WHERE id = $1`, counted).Scan(&leftBefore); err != nil {
		t.Fatal(err)
	}
	wake := store.Wake{SnoozedKey: "snoozed_for", Reason: "model_unreachable", WokenKey: "woken", WaitKey: "wait_ms", UnwaitedKey: "unwaited_ms",
		CountKey: "wakes", MaxWakes: 5, CountedAtKey: "counted_at", CountEvery: time.Hour}
	inserted := riverInserts(t, s)
	n, err := s.WakeWaiting(ctx, store.RiverJobs{Kind: "extract"}, wake)
	if err != nil || n != 8 {
		t.Fatalf("WakeWaiting woke %d (%v), want 8", n, err)
	}
	if q := inserted(); q != "q" {
		t.Errorf("River told of queue %q; want q, as of an insert", q)
	}
	for id, want := range map[int64]struct {
		state  string
		future bool
		woken  bool
	}{
		waiting: {"available", false, true}, waitingSoon: {"available", false, true},
		forDB: {"scheduled", true, false}, otherKind: {"scheduled", true, false}, due: {"available", false, false},
		running: {"running", false, false}, locked: {"scheduled", true, false},
		counted: {"available", false, true}, clockAhead: {"available", false, true}, notANumber: {"available", false, true},
		wokenEnough: {"scheduled", true, false}, wokenOnce: {"available", false, true},
		spread:  {"available", false, true},
		claimed: {"scheduled", true, false}, claimOver: {"available", false, true},
	} {
		var (
			state         string
			future, woken bool
			waits         int
		)
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, scheduled_at > now(), coalesce((metadata->>'woken')::bool, false), coalesce((metadata->>'waits')::int, 0)
			FROM river_job WHERE id = $1`, id).Scan(&state, &future, &woken, &waits); err != nil {
			t.Fatal(err)
		}
		if state != want.state || future != want.future || woken != want.woken || (woken && waits != 3 && slices.Contains([]int64{waiting, waitingSoon}, id)) {
			t.Errorf("job %d: %s, due later %v, woken %v (waits %d); want %s, %v, %v, the metadata kept", id, state, future, woken, waits, want.state, want.future, want.woken)
		}
	}
	credit := func(id int64) (waitMS, unwaitedMS int64) {
		t.Helper()
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce((metadata->>'wait_ms')::bigint, -1), coalesce((metadata->>'unwaited_ms')::bigint, -1)
			FROM river_job WHERE id = $1`, id).Scan(&waitMS, &unwaitedMS); err != nil {
			t.Fatal(err)
		}
		return waitMS, unwaitedMS
	}
	// What was left of the 60 s snooze at the wake is credited: no more
	// than was left just before it.
	if w, u := credit(counted); w != 0 || u <= 5000 || u > 5000+leftBefore {
		t.Errorf("counted snooze: wait_ms %d, unwaited_ms %d; want 0 and 5000 plus at most the %d ms left", w, u, leftBefore)
	}
	if w, u := credit(clockAhead); w != 0 || u != 20000 {
		t.Errorf("snooze ending past its length: wait_ms %d, unwaited_ms %d; want 0 and 20000", w, u)
	}
	if w, u := credit(notANumber); w != 0 || u != 0 {
		t.Errorf("snooze of an unreadable length: wait_ms %d, unwaited_ms %d; want 0, 0", w, u)
	}
	var wakes []int
	for _, id := range []int64{counted, waiting, wokenEnough, wokenOnce} {
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce((metadata->>'wakes')::int, 0) FROM river_job WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		wakes = append(wakes, n)
	}
	if !slices.Equal(wakes, []int{1, 0, 5, 5}) {
		t.Errorf("wakes counted %v; want 1 for a first wake, none for the wake of an uncounted snooze (a hold), 5 left as it was, 4 counted to 5", wakes)
	}
	// Measured from the run's start (attempted_at), not from the snooze:
	// at least the 60 s less the time since then, at most less 10 s.
	// Before, it was the 40 s left of the snooze, its spread counted as
	// waited.
	var sinceRun int64
	if err := s.Pool().QueryRow(ctx, `SELECT ceil(extract(epoch FROM now() - attempted_at) * 1000)::bigint FROM river_job WHERE id = $1`, spread).Scan(&sinceRun); err != nil {
		t.Fatal(err)
	}
	if w, u := credit(spread); w != 0 || u < 60000-sinceRun-1 || u > 50000 {
		t.Errorf("snooze shortened by its spread: wait_ms %d, unwaited_ms %d; want 0 and from %d to 50000", w, u, 60000-sinceRun-1)
	}
	// A job without a counted length (a hold) is credited nothing.
	if w, u := credit(waiting); w != 0 || u != 0 {
		t.Errorf("uncounted snooze: wait_ms %d, unwaited_ms %d; want 0, 0", w, u)
	}
	// Woken again before it ran (its snooze stored again by River, the
	// length left at 0): no second credit.
	if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 minute' WHERE id = $1`, counted); err != nil {
		t.Fatal(err)
	}
	_, before := credit(counted)
	if _, err := s.WakeWaiting(ctx, store.RiverJobs{Kind: "extract"}, wake); err != nil {
		t.Fatal(err)
	}
	if w, u := credit(counted); w != 0 || u != before {
		t.Errorf("woken twice for one snooze: wait_ms %d, unwaited_ms %d; want 0, %d", w, u, before)
	}
	// A counted snooze again (the job failed to find the server again),
	// woken within CountEvery of the last counted wake: not counted; past
	// it (the last count dated an hour and a second ago): counted.
	wakesOf := func(id int64) int {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT coalesce((metadata->>'wakes')::int, 0) FROM river_job WHERE id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		countedAt string
		want      int
	}{{"now()", 1}, {"now() - interval '1 hour 1 second'", 2}} {
		if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = now() + interval '1 minute',
			metadata = metadata || jsonb_build_object('wait_ms', 60000, 'counted_at', floor(extract(epoch FROM `+c.countedAt+`) * 1000)::bigint)
			WHERE id = $1`, counted); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WakeWaiting(ctx, store.RiverJobs{Kind: "extract"}, wake); err != nil {
			t.Fatal(err)
		}
		if n := wakesOf(counted); n != c.want {
			t.Errorf("woken with the last count at %s, CountEvery an hour: %d wakes counted, want %d", c.countedAt, n, c.want)
		}
	}
}

// WakeFirstWaiting wakes one job at a time, the one snoozed the most
// times for the reason, the oldest of those first; it leaves jobs of
// another kind or reason, due already, claimed, or locked by another
// transaction (until it lets go), and says 0 when none is left.
func TestWakeFirstWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	insert := waitingJobs(t, s)
	var (
		twice      = insert("extract", "scheduled", `{"for": "alone", "holds": 2}`, time.Minute)
		most       = insert("extract", "scheduled", `{"for": "alone", "holds": 5}`, time.Minute)
		mostLater  = insert("extract", "scheduled", `{"for": "alone", "holds": 5}`, time.Minute)
		soon       = insert("extract", "available", `{"for": "alone", "holds": 1}`, 30*time.Second) // a snooze River left available (any length, for this test)
		notANumber = insert("extract", "scheduled", `{"for": "alone", "holds": "x"}`, time.Minute)
		locked     = insert("extract", "scheduled", `{"for": "alone", "holds": 8}`, time.Minute)
	)
	// Each would come first, were it to be woken.
	insert("extract", "scheduled", `{"for": "alone", "holds": 9, "`+store.ClaimedByKey+`": 7}`, time.Minute)
	insert("extract", "scheduled", `{"for": "model_unreachable", "holds": 9}`, time.Minute)
	insert("embed", "scheduled", `{"for": "alone", "holds": 9}`, time.Minute)
	insert("extract", "available", `{"for": "alone", "holds": 9}`, -time.Second)
	insert("extract", "running", `{"for": "alone", "holds": 9}`, -time.Second)
	tx := lockJobRow(t, s, locked)
	// Each wake tells River's producers, as an insert does.
	inserted := riverInserts(t, s)
	wake := func() int64 {
		t.Helper()
		id, err := s.WakeFirstWaiting(ctx, store.RiverJobs{Kind: "extract"}, "for", "alone", "holds")
		if err != nil {
			t.Fatal(err)
		}
		if id != 0 {
			if q := inserted(); q != "q" {
				t.Errorf("wake of job %d: River told of queue %q; want q", id, q)
			}
		}
		return id
	}
	var woken []int64
	for range 6 {
		woken = append(woken, wake())
	}
	if want := []int64{most, mostLater, twice, soon, notANumber, 0}; !slices.Equal(woken, want) {
		t.Errorf("woken in turn %v; want %v (most holds first, the oldest of those, none while the last is locked)", woken, want)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if id := wake(); id != locked {
		t.Errorf("woke %d once the lock was let go; want %d", id, locked)
	}
	if id := wake(); id != 0 {
		t.Errorf("woke %d with none waiting; want 0", id)
	}
	// The woken ones are due now.
	for _, id := range []int64{most, mostLater, twice, soon, notANumber, locked} {
		var (
			state   string
			waiting bool
		)
		if err := s.Pool().QueryRow(ctx, `SELECT state::text, scheduled_at > now() FROM river_job WHERE id = $1`, id).Scan(&state, &waiting); err != nil {
			t.Fatal(err)
		}
		if state != "available" || waiting {
			t.Errorf("woken job %d: %s, still waiting %v; want available now", id, state, waiting)
		}
	}
}

// riverInserts listens as River's producers do for its insert
// notifications on s's schema, and returns a function giving the queue of
// the next one (failing the test when none comes within 10 s).
func riverInserts(t *testing.T, s *store.Store) (next func() string) {
	t.Helper()
	ctx := context.Background()
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `LISTEN "`+schema+`.river_insert"`); err != nil {
		t.Fatal(err)
	}
	return func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no insert notification: %v", err)
		}
		var payload struct{ Queue string }
		if err := json.Unmarshal([]byte(n.Payload), &payload); err != nil {
			t.Fatalf("insert notification %q: %v", n.Payload, err)
		}
		return payload.Queue
	}
}

// waitingJobs returns a function inserting a River job of kind, in state,
// with metadata, scheduled in from now, in queue q, and returning its id.
func waitingJobs(t *testing.T, s *store.Store) func(kind, state, metadata string, in time.Duration) int64 {
	return func(kind, state, metadata string, in time.Duration) int64 {
		t.Helper()
		var id int64
		if err := s.Pool().QueryRow(context.Background(), `INSERT INTO river_job (kind, args, queue, state, max_attempts, scheduled_at, metadata)
			VALUES ($1, '{}', 'q', $2::river_job_state, 5, now() + $3::interval, $4::jsonb) RETURNING id`,
			kind, state, in, metadata).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
}

// lockJobRow locks a River job's row in a transaction of its own, rolled
// back when the test ends (or earlier, by the caller).
func lockJobRow(t *testing.T, s *store.Store, id int64) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return tx
}
