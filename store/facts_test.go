package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memoryd/memoryd/store"
)

// TestSetFactIsAStatementMadeNow: facts.set wins over every extracted value
// whose source time is not later (ties included), a later turn overrides it,
// and a write that lost says so and returns the value that stays.
func TestSetFactIsAStatementMadeNow(t *testing.T) {
	ctx, s := setup(t)
	extract := func(value string, at time.Time, event string) {
		t.Helper()
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: value, SourceAt: at, EventID: event,
			Provenance: store.Provenance{Extractor: "rules"}}}); err != nil {
			t.Fatal(err)
		}
	}
	current := func() store.Fact {
		t.Helper()
		f, err := s.Fact(ctx, "alice", "location")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	extract("Tokyo", time.Now().Add(-time.Hour), "e1")
	f, stored, err := s.SetFact(ctx, "alice", "location", "Paris")
	if err != nil || !stored || f.Value != "Paris" || f.EventID != "" {
		t.Fatalf("set over an earlier turn = %+v, %v, %v; want Paris stored", f, stored, err)
	}
	// A turn stamped at the very same time does not override the statement.
	extract("Oslo", f.SourceAt, "zzz")
	if got := current(); got.Value != "Paris" {
		t.Fatalf("after an extracted value with the same source time: %+v, want Paris", got)
	}
	// A later turn does.
	extract("Rome", f.SourceAt.Add(time.Minute), "e2")
	if got := current(); got.Value != "Rome" {
		t.Fatalf("after a later turn: %+v, want Rome", got)
	}
	// And while that turn's time has not come, a set loses and says so.
	f, stored, err = s.SetFact(ctx, "alice", "location", "Berlin")
	if err != nil || stored || f.Value != "Rome" || f.EventID != "e2" {
		t.Fatalf("set under a later turn = %+v, %v, %v; want Rome kept and not stored", f, stored, err)
	}
	// Two statements: the last one received wins.
	if _, stored, err := s.SetFact(ctx, "alice", "pet", "cat"); err != nil || !stored {
		t.Fatalf("set pet: %v, %v", stored, err)
	}
	if f, stored, err := s.SetFact(ctx, "alice", "pet", "dog"); err != nil || !stored || f.Value != "dog" {
		t.Fatalf("set pet again = %+v, %v, %v", f, stored, err)
	}
}

func TestIsLockWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "55P03"}, true},
		{fmt.Errorf("upsert facts: %w", &pgconn.PgError{Code: "40P01"}), true},
		{&pgconn.PgError{Code: "40001"}, true},  // serialization failure
		{&pgconn.PgError{Code: "57014"}, false}, // cancelled: says nothing about what it waited for
		{&pgconn.PgError{Code: "23505"}, false},
		{context.DeadlineExceeded, false},
		{errors.New("55P03"), false},
		{nil, false},
	} {
		if got := store.IsLockWait(tc.err); got != tc.want {
			t.Errorf("IsLockWait(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestSetLockTimeoutEndsALockWait: with another transaction holding the
// fact's row, a write under SetLockTimeout fails as a lock wait instead of
// waiting for the holder.
func TestSetLockTimeoutEndsALockWait(t *testing.T) {
	ctx, s := setup(t)
	if _, _, err := s.SetFact(ctx, "alice", "location", "Paris"); err != nil {
		t.Fatal(err)
	}
	holder, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT * FROM facts WHERE user_id = 'alice' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
		if err := q.SetLockTimeout(ctx, 50*time.Millisecond); err != nil {
			return err
		}
		_, err := q.UpsertFacts(ctx, []store.FactWrite{{UserID: "alice", Key: "location", Value: "Rome", SourceAt: time.Now().Add(time.Minute), EventID: "e"}})
		return err
	})
	if !store.IsLockWait(err) {
		t.Fatalf("write under a held row lock: %v, want a lock wait", err)
	}
}

// TestSetFactAfterALaterDelete: a delete from a turn stamped ahead of the
// clock (within the allowed skew), of the key or of the value written, wins
// over a direct write made before its time, in either order: the write is
// refused, not reported as stored.
func TestSetFactAfterALaterDelete(t *testing.T) {
	ctx, s := setup(t)
	later := time.Now().Add(2 * time.Minute)
	for _, deleted := range []string{"", "Porto"} {
		del := store.FactWrite{UserID: "a" + deleted, Key: "city", Value: deleted, SourceAt: later, EventID: "e2", Op: store.FactDelete}
		// Delete first, then the direct write.
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{del}); err != nil {
			t.Fatal(err)
		}
		if f, stored, err := s.SetFact(ctx, del.UserID, "city", "Porto"); err != nil || stored || f.Key != "" {
			t.Errorf("delete of %q, then set = %+v, stored %v, %v; want refused with no fact", deleted, f, stored, err)
		}
		// The direct write first, then the delete.
		del.UserID = "b" + deleted
		if _, stored, err := s.SetFact(ctx, del.UserID, "city", "Porto"); err != nil || !stored {
			t.Fatalf("set = %v, %v", stored, err)
		}
		if _, err := s.UpsertFacts(ctx, []store.FactWrite{del}); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{"a" + deleted, "b" + deleted} {
			if f, err := s.Fact(ctx, u, "city"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: city = %+v, %v; want deleted", u, f, err)
			}
		}
	}
}
