package store_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestGiveWayBeforeStatementsNotCommits: a pool with Config.GiveWay calls
// it before each statement, batch and COPY it sends, with the statement's
// context, and never before a commit or a rollback (they release locks);
// Config.Committed is called once a transaction has ended: after a commit
// or rollback, or a statement, batch or COPY run on its own.
func TestGiveWayBeforeStatementsNotCommits(t *testing.T) {
	t.Parallel()
	_, url := storetest.Schema(t)
	type key struct{}
	var calls, withKey, ends atomic.Int64
	ctx := context.Background()
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 2, MinConns: 1, Logger: slog.New(slog.DiscardHandler),
		GiveWay: func(ctx context.Context) {
			calls.Add(1)
			if ctx.Value(key{}) != nil {
				withKey.Add(1)
			}
		},
		Committed: func(ctx context.Context) {
			if ctx.Value(key{}) != nil {
				ends.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pool := s.Pool()
	if _, err := pool.Exec(ctx, "CREATE TABLE gw (n int)"); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		run  func(ctx context.Context) error
		want int64
	}{
		{"one statement", func(ctx context.Context) error {
			_, err := pool.Exec(ctx, "INSERT INTO gw VALUES (1)")
			return err
		}, 1},
		{"begin, two statements, commit", func(ctx context.Context) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "INSERT INTO gw VALUES (2)"); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO gw VALUES (3)")
				return err
			})
		}, 3},
		{"begin, statement, rollback", func(ctx context.Context) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO gw VALUES (4)"); err != nil {
				return err
			}
			return tx.Rollback(ctx)
		}, 2},
		{"batch", func(ctx context.Context) error {
			b := &pgx.Batch{}
			b.Queue("INSERT INTO gw VALUES (5)")
			b.Queue("INSERT INTO gw VALUES (6)")
			return pool.SendBatch(ctx, b).Close()
		}, 1},
		{"copy", func(ctx context.Context) error {
			_, err := pool.CopyFrom(ctx, pgx.Identifier{"gw"}, []string{"n"}, pgx.CopyFromRows([][]any{{7}, {8}}))
			return err
		}, 1},
	} {
		calls.Store(0)
		withKey.Store(0)
		ends.Store(0)
		if err := tt.run(context.WithValue(ctx, key{}, true)); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if calls.Load() != tt.want || withKey.Load() != tt.want {
			t.Errorf("%s: GiveWay called %d times (%d with the statement's context), want %d", tt.name, calls.Load(), withKey.Load(), tt.want)
		}
		if ends.Load() != 1 {
			t.Errorf("%s: Committed called %d times with the statement's context, want once, at the end", tt.name, ends.Load())
		}
	}
}
