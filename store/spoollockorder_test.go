package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// Export copies (export_spools) are deleted several at a time by a forget
// of their user (by the (user_id, created_at) index, in creation order)
// and by the reconcile job's delete of the copies unread for SpoolTTL (by
// read_at, in the order they were last read), and by a save's delete of
// its user's copies past the newest few: two of them each held a copy the
// other waited for, and Postgres failed one of them (40P01), a forget
// answered with an error. Each locks them in id order first.
//
// Alice's expired copies c1, c2 and c3 were created in that order and
// last read in the order c2, c3, c1. The third transaction holds c1: the
// forget waits for it holding nothing; the expiry holds c2 and c3 and
// waits for it; once c1 is let go the forget waits for c2.
func TestDeleteExpiredSpoolsBesideForget(t *testing.T) {
	ctx, s := setup(t)
	ids := disorderedSpools(t, ctx, s)
	c1, c2, c3 := ids[0], ids[1], ids[2]
	if got := deletedSpools(t, s, `DELETE FROM export_spools WHERE user_id = 'alice' RETURNING id`); !slices.Equal(got, ids) {
		t.Fatalf("a delete of alice's copies meets them in the order %v, want %v (creation order)", got, ids)
	}
	expiry := `DELETE FROM export_spools WHERE read_at < now() - make_interval(secs => $1) RETURNING id`
	if got := deletedSpools(t, s, expiry, store.SpoolTTL.Seconds()); !slices.Equal(got, []string{c2, c3, c1}) {
		t.Fatalf("the delete of expired copies meets them in the order %v, want %v (read order)", got, []string{c2, c3, c1})
	}

	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM export_spools WHERE id = $1 FOR KEY SHARE`, c1); err != nil {
		t.Fatal(err)
	}
	forgetter, forgotten := waitingOn(t, s, holder, "the forget", "the held copy", func() error {
		_, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{})
		return err
	})
	expired := make(chan error, 1)
	go func() {
		_, err := s.DeleteExpiredSpools(ctx)
		expired <- err
	}()
	blockedByEither(t, s, holder, forgetter, func() bool { return len(expired) > 0 }, "the expiry to wait for the forget or the held copy, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, eerr := <-forgotten, <-expired; ferr != nil || eerr != nil {
		t.Fatalf("forget: %v; delete of expired copies: %v; want both done", ferr, eerr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM export_spools WHERE user_id = 'alice'`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of alice's copies left (%v), want none", left, err)
	}
}

// disorderedSpools writes three copies of alice, unread for two hours,
// created in id order and last read in the order of the second, the
// third, the first, beside 2,000 fresh copies of other users (so that
// the deletes find them by an index, as on a busy server), and returns
// their ids in creation order.
func disorderedSpools(t *testing.T, ctx context.Context, s *store.Store) []string {
	t.Helper()
	ids := []string{"c1", "c2", "c3"}
	now := time.Now()
	for i, id := range ids {
		created := now.Add(-5*time.Hour + time.Duration(i)*time.Minute)
		read := now.Add(-2*time.Hour + time.Duration((i+2)%3)*time.Minute)
		if _, err := s.Pool().Exec(ctx, `INSERT INTO export_spools (id, user_id, memory, data, created_at, read_at, size, part_bytes)
			VALUES ($1, 'alice', '0', '', $2, $3, 0, 1024)`, id, created, read); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO export_spools (id, user_id, memory, data, size, part_bytes)
		SELECT 'x' || i, 'u' || (i % 500), '0', '', 0, 1024 FROM generate_series(1, 2000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE export_spools`); err != nil {
		t.Fatal(err)
	}
	return ids
}

// deletedSpools runs a delete returning copy ids in a transaction it
// rolls back and returns them in the order the delete met them.
func deletedSpools(t *testing.T, s *store.Store, sql string, args ...any) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var got []string
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
