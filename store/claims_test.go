package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
)

// burst records n pending turns of alice's conversation conv.
func burst(t *testing.T, ctx context.Context, s *store.Store, conv string, n int) []store.Turn {
	t.Helper()
	var turns []store.Turn
	for i := range n {
		turns = append(turns, store.Turn{EventID: fmt.Sprintf("%s-%d", conv, i), UserID: "alice", ConversationID: conv,
			UserMessage: "hi", TurnAt: t0.Add(time.Duration(i) * time.Second)})
	}
	if _, err := s.InsertTurns(ctx, turns); err != nil {
		t.Fatal(err)
	}
	return turns
}

func claim(jobID int64, conv string, own string) store.Claim {
	return store.Claim{JobID: jobID, UserID: "alice", ConversationID: conv, Own: []string{own}, Limit: 20, TTL: time.Minute}
}

// TestConcurrentClaimsDoNotSplitABurst: the jobs of a debounced burst are
// scheduled for the same moment, so they claim the conversation at once.
// Exactly one of them must get the whole burst, the others nothing: a split
// burst costs a model call per part, and a part of one turn is sent in the
// single-turn format (what made TestDebounceExtractsABurstInOneCall flaky).
func TestConcurrentClaimsDoNotSplitABurst(t *testing.T) {
	ctx, s := setup(t)
	const turns, rounds = 20, 50
	for r := range rounds {
		conv := fmt.Sprintf("c%d", r)
		batch := burst(t, ctx, s, conv, turns)
		var (
			wg     sync.WaitGroup
			start  = make(chan struct{})
			claims = make([][]store.Turn, turns)
			errs   = make([]error, turns)
		)
		for i, turn := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				claims[i], errs[i] = s.ClaimConversationTurns(ctx, claim(int64(r*100+i+1), conv, turn.EventID))
			}()
		}
		close(start)
		wg.Wait()
		var sizes []int
		for i := range claims {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			sizes = append(sizes, len(claims[i]))
		}
		slices.Sort(sizes)
		if want := append(make([]int, turns-1), turns); !slices.Equal(sizes, want) {
			t.Fatalf("round %d: claim sizes %v, want one claim of the whole burst %v", r, sizes, want)
		}
	}
}

// TestClaimWaitsForALockedTurn is the deterministic form of the split: while
// another transaction holds one turn of the burst (as a concurrent claim
// does between locking its first row and its last), a claim must wait for
// it rather than return the burst without it.
func TestClaimWaitsForALockedTurn(t *testing.T) {
	ctx, s := setup(t)
	batch := burst(t, ctx, s, "c", 4)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var xid int64
	if err := tx.QueryRow(ctx, `SELECT txid_current() % 4294967296` /* the 32-bit xid pg_locks shows */).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM turns WHERE event_id = $1 FOR UPDATE`, batch[2].EventID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		turns []store.Turn
		err   error
	}
	done := make(chan result, 1)
	go func() {
		turns, err := s.ClaimConversationTurns(ctx, claim(1, "c", batch[0].EventID))
		done <- result{turns, err}
	}()
	// Wait until the claim either returned or waits for the transaction.
	var res *result
	eventstest.Eventually(t, "the claim to return or wait for the locked turn", 30*time.Second, func() (bool, string) {
		select {
		case r := <-done:
			res = &r
			return true, ""
		default:
		}
		var waiting bool
		err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE NOT granted AND locktype = 'transactionid' AND transactionid::text::bigint = $1)`, xid).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting, "the claim neither returned nor waits for the transaction holding the turn"
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if res == nil {
		r := <-done
		res = &r
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.turns) != len(batch) {
		t.Fatalf("claimed %d turns while one was locked elsewhere, want the whole burst of %d", len(res.turns), len(batch))
	}
}

// TestClaimIsTheJobsOwn: a job's claim keeps other jobs out until it expires
// or is released, but the same job (run again after a shutdown, a retry or a
// rescue) takes it back at once.
func TestClaimIsTheJobsOwn(t *testing.T) {
	ctx, s := setup(t)
	batch := burst(t, ctx, s, "c", 3)
	ids := []string{batch[0].EventID, batch[1].EventID, batch[2].EventID}
	got := func(c store.Claim) int {
		t.Helper()
		turns, err := s.ClaimConversationTurns(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return len(turns)
	}
	if n := got(claim(7, "c", ids[0])); n != 3 {
		t.Fatalf("job 7 claimed %d turns, want 3", n)
	}
	if n := got(claim(8, "c", ids[1])); n != 0 {
		t.Fatalf("job 8 claimed %d turns job 7 holds", n)
	}
	if n := got(claim(7, "c", ids[0])); n != 3 {
		t.Fatalf("job 7 run again claimed %d turns, want its 3 back", n)
	}
	if err := s.ReleaseClaims(ctx, 8, "alice", ids); err != nil {
		t.Fatal(err)
	}
	if n := got(claim(8, "c", ids[1])); n != 0 {
		t.Fatalf("job 8 released job 7's claim: it then claimed %d turns", n)
	}
	if err := s.ReleaseClaims(ctx, 7, "alice", ids); err != nil {
		t.Fatal(err)
	}
	if n := got(claim(8, "c", ids[1])); n != 3 {
		t.Fatalf("after job 7 released its claim, job 8 claimed %d turns, want 3", n)
	}
}

// A turn processed is no burst's: its claim ends with it, all of it (the
// job too), so that no end of a job's claims (ReleaseClaims, a takeover's)
// locks it again, and a forget need not lock it in their order (a forget
// of 30,000 claimed turns locked each: BenchmarkForgetUser).
func TestMarkProcessedEndsTheClaim(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.InsertTurns(ctx, []store.Turn{
		{EventID: "e1", UserID: "alice", ConversationID: "c", UserMessage: "In Paris", TurnAt: t0},
		{EventID: "e2", UserID: "alice", ConversationID: "c", UserMessage: "Gate 9", TurnAt: t0.Add(time.Minute)},
	}); err != nil {
		t.Fatal(err)
	}
	if turns, err := s.ClaimConversationTurns(ctx, store.Claim{JobID: 7, UserID: "alice", ConversationID: "c", Limit: 10, TTL: time.Hour}); err != nil || len(turns) != 2 {
		t.Fatalf("claimed %d turns (%v), want 2", len(turns), err)
	}
	if err := s.MarkProcessed(ctx, "alice", []string{"e1", "e2"}, store.Provenance{Extractor: "llm"}); err != nil {
		t.Fatal(err)
	}
	var claimed int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE claimed_by IS NOT NULL OR claimed_until IS NOT NULL`).Scan(&claimed); err != nil || claimed != 0 {
		t.Fatalf("%d processed turns still claimed (%v), want none", claimed, err)
	}
}

// TestClearProcessedClaims: the claims left on processed turns by releases
// before MarkProcessed ended them are cleared in batches, a turn another
// transaction holds skipped rather than waited for (and cleared by a later
// batch); a turn not processed keeps its job's claim.
func TestClearProcessedClaims(t *testing.T) {
	ctx, s := setup(t)
	burst(t, ctx, s, "old", 5)
	if turns, err := s.ClaimConversationTurns(ctx, claim(5, "old", "old-0")); err != nil || len(turns) != 5 {
		t.Fatalf("claimed %d turns (%v), want 5", len(turns), err)
	}
	// Processed as an earlier release did: the claim kept.
	if _, err := s.Pool().Exec(ctx, `UPDATE turns SET status = 'processed', processed_at = now() WHERE conversation_id = 'old'`); err != nil {
		t.Fatal(err)
	}
	burst(t, ctx, s, "live", 2)
	if turns, err := s.ClaimConversationTurns(ctx, claim(9, "live", "live-0")); err != nil || len(turns) != 2 {
		t.Fatalf("claimed %d turns (%v), want 2", len(turns), err)
	}
	type row struct {
		by    *int64
		until *time.Time
	}
	read := func() map[string]row {
		t.Helper()
		rows, err := s.Pool().Query(ctx, `SELECT event_id, claimed_by, claimed_until FROM turns`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]row{}
		for rows.Next() {
			var (
				id string
				r  row
			)
			if err := rows.Scan(&id, &r.by, &r.until); err != nil {
				t.Fatal(err)
			}
			out[id] = r
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	live := read()

	// One stale turn held by another transaction (a forget's lock).
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT FROM turns WHERE event_id = 'old-2' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	var cleared int64
	for batches := 0; ; batches++ {
		if batches > 10 {
			t.Fatal("the batches did not end")
		}
		n, err := s.ClearProcessedClaims(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("a batch of 2 cleared %d claims", n)
		}
		if n == 0 {
			break
		}
		cleared += n
	}
	if cleared != 4 {
		t.Fatalf("cleared %d claims beside the held turn, want 4", cleared)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.ClearProcessedClaims(ctx, 2); err != nil || n != 1 {
		t.Fatalf("after the hold: cleared %d (%v), want the held turn's 1", n, err)
	}
	got := read()
	for i := range 5 {
		if r := got[fmt.Sprintf("old-%d", i)]; r.by != nil || r.until != nil {
			t.Errorf("processed turn old-%d still claimed (by a job: %v, until %v)", i, r.by != nil, r.until)
		}
	}
	for _, id := range []string{"live-0", "live-1"} {
		r, was := got[id], live[id]
		if r.by == nil || *r.by != 9 || r.until == nil || !r.until.Equal(*was.until) {
			t.Errorf("pending turn %s: claim by %v until %v, want job 9's, unchanged", id, r.by, r.until)
		}
	}
}

// TestReleasedTurnsAreTheLiveJobsNotOrphans: a burst's turns that its job
// released (between its attempts) are no orphans while that job is live:
// their own jobs ended when they found them claimed, and the job claims
// them again at its next run. Once it is finished they are. Before, the
// release made them orphans at once, and the reconciler gave each a job
// that extracted it beside the burst's next run.
func TestReleasedTurnsAreTheLiveJobsNotOrphans(t *testing.T) {
	ctx, s := setup(t)
	batch := burst(t, ctx, s, "c", 3)
	var job int64
	if err := s.Pool().QueryRow(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, attempt, attempted_at)
		VALUES ('test_extract', '{"owner": "alice", "turn_ids": ["c-0"]}', 'extract', 'retryable', 5, 1, now()) RETURNING id`).Scan(&job); err != nil {
		t.Fatal(err)
	}
	if turns, err := s.ClaimConversationTurns(ctx, claim(job, "c", batch[0].EventID)); err != nil || len(turns) != 3 {
		t.Fatalf("claim = %d turns, %v; want the burst's 3", len(turns), err)
	}
	ids := []string{batch[0].EventID, batch[1].EventID, batch[2].EventID}
	if err := s.ReleaseClaims(ctx, job, "alice", ids); err != nil {
		t.Fatal(err)
	}
	orphans := func() []string {
		t.Helper()
		var got []string
		err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			o, err := q.OrphanedTurns(ctx, testJobs, 10)
			for _, t := range o {
				got = append(got, t.EventID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := orphans(); len(got) != 0 {
		t.Fatalf("orphans %v while the job that released them is live; want none", got)
	}
	// Released: another job of the conversation claims them at once.
	if turns, err := s.ClaimConversationTurns(ctx, claim(job+1000, "c", batch[1].EventID)); err != nil || len(turns) != 3 {
		t.Fatalf("another job claimed %d turns, %v; want the 3 released", len(turns), err)
	}
	if err := s.ReleaseClaims(ctx, job+1000, "alice", ids); err != nil {
		t.Fatal(err)
	}
	// No live job of that id: they are orphans, but for the live job's
	// own turn.
	if got := orphans(); !slices.Equal(got, ids[1:]) {
		t.Fatalf("orphans %v once no live job released them; want %v", got, ids[1:])
	}
}

// TestClaimOnlyOwn: a claim of its own turns alone (a burst's job sending
// its turns one a request) takes none of the conversation's other pending
// turns, and nothing when its own are claimed by another job.
func TestClaimOnlyOwn(t *testing.T) {
	ctx, s := setup(t)
	batch := burst(t, ctx, s, "c", 3)
	c := claim(1, "c", batch[1].EventID)
	c.OnlyOwn = true
	if turns, err := s.ClaimConversationTurns(ctx, c); err != nil || len(turns) != 1 || turns[0].EventID != batch[1].EventID {
		t.Fatalf("claim of its own turn alone = %+v, %v; want %s", turns, err, batch[1].EventID)
	}
	c.JobID = 2
	if turns, err := s.ClaimConversationTurns(ctx, c); err != nil || len(turns) != 0 {
		t.Fatalf("claim of its own turn alone, held by another job = %d turns, %v; want none", len(turns), err)
	}
}

// TestClaimTurns: a job that is no burst claims those of its turns a burst
// could (pending, of a conversation) and that no other job holds, and is
// told which another job holds; a burst then leaves its claimed turns
// alone, and its next run takes them back.
func TestClaimTurns(t *testing.T) {
	ctx, s := setup(t)
	batch := burst(t, ctx, s, "c", 3)
	if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: "solo", UserID: "alice", UserMessage: "hi", TurnAt: t0}}); err != nil {
		t.Fatal(err)
	}
	ids := []string{batch[0].EventID, batch[1].EventID, "solo"}
	c := store.Claim{JobID: 7, UserID: "alice", Own: ids, TTL: time.Minute}
	if held, err := s.ClaimTurns(ctx, c); err != nil || len(held) != 0 {
		t.Fatalf("job 7's claim: held by others %v, %v; want none", held, err)
	}
	// The burst of the conversation takes c-2 alone.
	if turns, err := s.ClaimConversationTurns(ctx, claim(8, "c", batch[2].EventID)); err != nil || len(turns) != 1 || turns[0].EventID != batch[2].EventID {
		t.Fatalf("the burst beside job 7's claim took %+v, %v; want %s alone", turns, err, batch[2].EventID)
	}
	if held, err := s.ClaimTurns(ctx, c); err != nil || len(held) != 0 {
		t.Fatalf("job 7's next run: held by others %v, %v; want none (its own claim)", held, err)
	}
	c.JobID, c.Own = 9, []string{batch[0].EventID, batch[2].EventID, "solo"}
	held, err := s.ClaimTurns(ctx, c)
	slices.Sort(held)
	if err != nil || !slices.Equal(held, []string{batch[0].EventID, batch[2].EventID}) {
		t.Fatalf("job 9's claim: held by others %v, %v; want %s and %s", held, err, batch[0].EventID, batch[2].EventID)
	}
	var claimed int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM turns WHERE event_id = 'solo' AND claimed_by IS NOT NULL`).Scan(&claimed); err != nil || claimed != 0 {
		t.Fatalf("a turn of no conversation claimed (%d, %v): no burst takes it", claimed, err)
	}
}
