package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// The changes outbox's rows are deleted by three writers: the publisher
// once NATS has a user's batch (SendChanges, by id), a forget of the user
// (every row of the user) and the drop of old unsent changes
// (DropChanges). A user's seq follows commit order, not id order, and a
// row lies where the table had room when it was numbered: deleted as each
// statement's plan met them (the forget's by (user_id, seq), in seq
// order; the publisher's bitmap scan and the drop's sequential scan in
// the table's order), a forget and one of the others each held a change
// the other waited for, and Postgres failed one of them (40P01): a forget
// answered with an error, or a batch sent again. Each locks them in id
// order first (deleteChangesWhere).

// TestSendChangesBesideForget: the publisher's delete of bob's batch
// beside a forget of bob.
func TestSendChangesBesideForget(t *testing.T) {
	ctx, s := setup(t)
	ids := disorderedChanges(t, ctx, s)
	changesDeletedBesideForget(t, s, ids, `DELETE FROM memory_changes WHERE id = ANY($1) RETURNING id`, []any{ids}, func() error {
		n, err := s.SendChanges(ctx, "bob", 0, 10, func([]store.Change) error { return nil })
		if err == nil && n != 3 {
			err = fmt.Errorf("sent %d changes, want 3", n)
		}
		return err
	})
}

// TestDropChangesBesideForget: the drop of old unsent changes (all of
// bob's but the newest, lo) beside a forget of bob.
func TestDropChangesBesideForget(t *testing.T) {
	ctx, s := setup(t)
	ids := disorderedChanges(t, ctx, s)
	before := time.Now().Add(time.Hour)
	changesDeletedBesideForget(t, s, ids, `DELETE FROM memory_changes c WHERE c.seq IS NOT NULL AND c.created_at < $1
		AND c.seq < (SELECT max(m.seq) FROM memory_changes m WHERE m.user_id = c.user_id) RETURNING id`, []any{before}, func() error {
		_, err := s.DropChanges(ctx, before)
		return err
	})
}

// changesDeletedBesideForget runs del (a delete of bob's changes of ids
// lo, mid and hi, from disorderedChanges, that meets them as the
// statement sql, with args, would: hi before mid, the table's order) and
// a forget of bob (which met them in seq order, mid first), in the order
// that closes a cycle when the two lock them in other orders: the third
// transaction holds mid, the forget waits for it, del locks hi and waits
// for mid; once mid is let go, the forget waits for hi. Both must
// succeed, and leave none of bob's changes.
func changesDeletedBesideForget(t *testing.T, s *store.Store, ids []int64, sql string, args []any, del func() error) {
	t.Helper()
	ctx := context.Background()
	lo, mid, hi := ids[0], ids[1], ids[2]
	// The orders the statements meet them in, rolled back: the forget's
	// delete alone (by bob's (user_id, seq) index), del's.
	if got := deletedOrder(t, s, `DELETE FROM memory_changes WHERE user_id = 'bob' RETURNING id`); !slices.Equal(got, []int64{mid, hi, lo}) {
		t.Fatalf("a delete of bob's changes meets them in the order %v, want %v (seq order)", got, []int64{mid, hi, lo})
	}
	got := slices.DeleteFunc(deletedOrder(t, s, sql, args...), func(id int64) bool { return !slices.Contains(ids, id) })
	if len(got) < 2 || slices.Index(got, hi) > slices.Index(got, mid) || slices.Index(got, hi) < 0 {
		t.Fatalf("del meets bob's changes in the order %v, want %d before %d (the table's order)", got, hi, mid)
	}

	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM memory_changes WHERE id = $1 FOR KEY SHARE`, mid); err != nil {
		t.Fatal(err)
	}
	forgetter, forgotten := waitingOn(t, s, holder, "the forget", "the held change", func() error {
		_, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{})
		return err
	})
	deleted := make(chan error, 1)
	go func() { deleted <- del() }()
	blockedByEither(t, s, holder, forgetter, func() bool { return len(deleted) > 0 }, "the delete to wait for the forget or the held change, or finish")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ferr, derr := <-forgotten, <-deleted; ferr != nil || derr != nil {
		t.Fatalf("forget: %v; delete of bob's changes: %v; want both done", ferr, derr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM memory_changes WHERE id = ANY($1)`, ids).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of bob's changes left (%v), want none", left, err)
	}
}

// disorderedChanges writes three changes of bob, of ids lo < mid < hi,
// committed in the order mid, hi, lo (so numbered 3, 1, 2), beside 5,000
// changes of other users (so that a delete of bob's finds them by an
// index, as on a real outbox). The row of mid is then written again
// elsewhere (an indexed column changed: no HOT update), as its numbering
// writes it where the table has room (a vacuumed outbox reuses the space
// of sent changes): the table holds them in the order hi, lo, mid. It
// returns their ids in id order.
func disorderedChanges(t *testing.T, ctx context.Context, s *store.Store) []int64 {
	t.Helper()
	var txs []pgx.Tx
	var ids []int64
	for range 3 {
		tx, err := s.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(context.Background()) })
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO memory_changes (user_id, payload) VALUES ('bob', '{"type": "context.cleared"}') RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		txs, ids = append(txs, tx), append(ids, id)
	}
	for _, i := range []int{1, 2, 0} {
		if err := txs[i].Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(seq ORDER BY id) FROM memory_changes WHERE id = ANY($1)`, ids).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []int64{3, 1, 2}) {
		t.Fatalf("bob's changes numbered %v in id order, want [3 1 2]", seqs)
	}
	if _, err := s.Pool().Exec(ctx, `UPDATE memory_changes SET created_at = created_at + interval '1 microsecond' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	var order []int64
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(id ORDER BY ctid) FROM memory_changes WHERE id = ANY($1)`, ids).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if want := []int64{ids[2], ids[0], ids[1]}; !slices.Equal(order, want) {
		t.Fatalf("bob's changes in the table's order %v, want %v", order, want)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memory_changes (user_id, payload)
		SELECT 'u' || (i % 500), '{"type": "context.cleared"}' FROM generate_series(1, 5000) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE memory_changes`); err != nil {
		t.Fatal(err)
	}
	return ids
}

// deletedOrder runs a delete returning ids in a transaction it rolls back
// and returns them in the order the delete met them.
func deletedOrder(t *testing.T, s *store.Store, sql string, args ...any) []int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
