package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// A forget deletes the user's daily token counts (llm_usage_daily) in the
// table's order (no index leads with the user), and the drop of old
// counts (DeleteSpendBefore) by the (day, user_id) key: with two old days
// of alice's not yet dropped, written in the order d2, d1, each held a
// count the other waited for (40P01). The third transaction holds d2:
// the forget waits for it holding nothing; the drop holds d1 and waits
// for d2; once d2 is let go, the forget waits for d1.
func TestDeleteSpendBeforeBesideForget(t *testing.T) {
	ctx, s := setup(t)
	today := store.Day(time.Now())
	d1, d2 := today.AddDate(0, 0, -5), today.AddDate(0, 0, -4)
	for _, d := range []time.Time{d2, d1} {
		if _, err := s.Pool().Exec(ctx, `INSERT INTO llm_usage_daily (day, user_id, tokens) VALUES ($1, 'alice', 10)`, d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO llm_usage_daily (day, user_id, tokens)
		SELECT $1::date - (i % 2), 'u' || i, 10 FROM generate_series(1, 3000) i`, today); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE llm_usage_daily`); err != nil {
		t.Fatal(err)
	}
	days := func(sql string, args ...any) []string {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var got []string
		if err := tx.QueryRow(ctx, `WITH d AS (`+sql+` RETURNING day, user_id) SELECT coalesce(array_agg(day::text), '{}') FROM d WHERE user_id = 'alice'`, args...).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	s1, s2 := d1.Format(time.DateOnly), d2.Format(time.DateOnly)
	if got := days(`DELETE FROM llm_usage_daily WHERE user_id = 'alice'`); !slices.Equal(got, []string{s2, s1}) {
		t.Fatalf("a delete of alice's counts meets them in the order %v, want %v (the table's)", got, []string{s2, s1})
	}
	if got := days(`DELETE FROM llm_usage_daily WHERE day < $1`, today.AddDate(0, 0, -1)); !slices.Equal(got, []string{s1, s2}) {
		t.Fatalf("the drop of old counts meets alice's in the order %v, want %v (by day)", got, []string{s1, s2})
	}

	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM llm_usage_daily WHERE day = $1 AND user_id = 'alice' FOR KEY SHARE`, d2); err != nil {
		t.Fatal(err)
	}
	forgetter, forgotten := waitingOn(t, s, holder, "the forget", "the held count", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		return err
	})
	dropped := make(chan error, 1)
	go func() {
		_, err := s.DeleteSpendBefore(ctx, today.AddDate(0, 0, -1))
		dropped <- err
	}()
	blockedByEither(t, s, holder, forgetter, func() bool { return len(dropped) > 0 }, "the drop to wait for the forget or the held count, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, derr := <-forgotten, <-dropped; ferr != nil || derr != nil {
		t.Fatalf("forget: %v; drop of old counts: %v; want both done", ferr, derr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM llm_usage_daily WHERE user_id = 'alice'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of alice's counts left (%v), want none", left, err)
	}
}

// An extraction's save adds the tokens spent of each of its users (a
// legacy job's, of several) to their day's counts and to the day's shard
// of each (AddUsageOn), and a save of one user's tokens of another model
// (AddTurnUsage) to that user's day and shard. Each user's count was
// added before the next user's, with its shard: with alice and bob in the
// same shard, the save of both held the shard while it waited for bob's
// day, which the other save held while it waited for the shard (40P01).
// The third transaction holds bob's total of the first save's model: the
// save of both waits for it, having added alice's; the other save adds
// bob's day and waits for the shard, if the first holds it; once bob's
// total is let go, the save of both waits for bob's day, if the other
// holds it.
func TestAddUsageOfTwoUsersOfAShardBesideAnother(t *testing.T) {
	ctx, s := setup(t)
	var bob string
	if err := s.Pool().QueryRow(ctx, `SELECT u FROM generate_series(1, 1000) i, LATERAL (SELECT 'bob' || i AS u) x
		WHERE hashtext(u) & 15 = hashtext('alice') & 15 ORDER BY i LIMIT 1`).Scan(&bob); err != nil {
		t.Fatal(err)
	}
	day := store.Day(time.Now())
	if err := s.AddUsageOn(ctx, day, "m1", map[string]store.TokenUsage{bob: {PromptTokens: 1}}); err != nil {
		t.Fatal(err)
	}
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM llm_usage WHERE user_id = $1 AND model = 'm1' FOR UPDATE`, bob); err != nil {
		t.Fatal(err)
	}
	both, bothDone := waitingOn(t, s, holder, "the save of both", "the held total", func() error {
		return s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			return q.AddUsageOn(ctx, day, "m1", map[string]store.TokenUsage{"alice": {PromptTokens: 5}, bob: {PromptTokens: 7}})
		})
	})
	other, otherPID := begin(t, s)
	added := make(chan error, 1)
	go func() {
		added <- s.WithTx(other).AddUsageOn(ctx, day, "m2", map[string]store.TokenUsage{bob: {PromptTokens: 11}})
	}()
	blockedBy(t, s, both, func() bool { return len(added) > 0 }, "the other save to wait for the save of both, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	blockedBy(t, s, otherPID, func() bool { return len(bothDone) > 0 }, "the save of both to wait for the other, or finish")
	aerr := <-added
	cerr := other.Commit(ctx)
	if berr := <-bothDone; berr != nil || aerr != nil || cerr != nil {
		t.Fatalf("save of both: %v; other save: %v, commit %v; want both done", berr, aerr, cerr)
	}
	var tokens int64
	if err := s.Pool().QueryRow(ctx, `SELECT sum(tokens) FROM llm_usage_daily_shards WHERE day = $1`, day).Scan(&tokens); err != nil || tokens != 24 {
		t.Fatalf("the day's shards count %d tokens (%v), want 24", tokens, err)
	}
}
