package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestLockTableFull: Postgres's "out of shared memory" (53200), wrapped
// or not, is the full lock table a migration retries on; other errors,
// a deadlock included (IsLockWait's), are not.
func TestLockTableFull(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "53200", Message: "out of shared memory"}, true},
		{fmt.Errorf("migrate 023_documents.sql: %w", &pgconn.PgError{Code: "53200"}), true},
		{&pgconn.PgError{Code: "40P01"}, false},
		{&pgconn.PgError{Code: "53100"}, false}, // disk full: not transient
		{errors.New("out of shared memory"), false},
		{nil, false},
	} {
		if got := lockTableFull(tc.err); got != tc.want {
			t.Errorf("lockTableFull(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
