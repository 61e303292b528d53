package store_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// TestHistoryChangedAtIsTheWritesTime: a fact history entry's changed_at
// was its transaction's start (now()), not when the change was made: a
// write whose transaction began before another's, and changed the fact
// after that one committed, was dated before it. The history, listed in
// the order recorded, then went back in time, and an export (ordered by
// changed_at) and its import put Paris→Rome before Lisbon→Paris.
func TestHistoryChangedAtIsTheWritesTime(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.SetFact(ctx, "lena", "location", "Lisbon"); err != nil {
		t.Fatal(err)
	}
	if err := s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // the transaction has begun
			return err
		}
		// Another transaction changes the fact and commits meanwhile.
		if _, _, err := s.SetFact(ctx, "lena", "location", "Paris"); err != nil {
			return err
		}
		_, _, err := q.SetFact(ctx, "lena", "location", "Rome")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h, err := s.FactHistory(ctx, "lena")
	if err != nil || len(h) != 3 {
		t.Fatalf("lena's history: %+v, %v; want 3 changes", h, err)
	}
	for i := 1; i < len(h); i++ {
		if h[i].ChangedAt.Before(h[i-1].ChangedAt) {
			t.Errorf("change %d (%v→%v) dated %s, before change %d (%v→%v) dated %s, which it followed",
				i, deref(h[i].OldValue), deref(h[i].NewValue), h[i].ChangedAt, i-1, deref(h[i-1].OldValue), deref(h[i-1].NewValue), h[i-1].ChangedAt)
		}
	}
}

func deref(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}
