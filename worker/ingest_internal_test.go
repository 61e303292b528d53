package worker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestUnreachable: only a database that could not be reached ends an
// ingest's backoff at its first answered ping; a batch out of time (it may
// have waited on a lock: an operator's ALTER TABLE or VACUUM FULL of
// turns) or refused by Postgres waits the backoff out, since a ping
// answers while the writes still fail.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	_, refused := pgconn.Connect(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, timedOut := pgconn.Connect(expired, "postgres://nobody@192.0.2.1:5432/none?sslmode=disable")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now", fmt.Errorf("insert turns: %w", &pgconn.PgError{Code: "57P03"}), true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"read-only database", fmt.Errorf("insert turns: %w", &pgconn.PgError{Code: "25006"}), true},
		{"connect timed out", timedOut, false},
		{"batch out of time", fmt.Errorf("insert turns: %w", context.DeadlineExceeded), false},
		{"lock timeout", &pgconn.PgError{Code: "55P03"}, false},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, false},
		{"disk full", &pgconn.PgError{Code: "53100"}, false},
		{"table gone", &pgconn.PgError{Code: "42P01"}, false},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error to classify", c.name)
		}
		if got := unreachable(c.err); got != c.want {
			t.Errorf("unreachable(%s: %v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
