package app

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestCtxError: an error of enrich's pool, whose statements are cancelled
// on the server (query_canceled), reads as the deadline or the stop that
// ended its context, as the error of a closed connection did; other errors
// and those of a live context are as they were.
func TestCtxError(t *testing.T) {
	t.Parallel()
	canceled := &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"}
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	stopped, stop := context.WithCancel(context.Background())
	stop()
	live := context.Background()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		is   []error
		not  []error
	}{
		{"deadline", expired, canceled, []error{context.DeadlineExceeded, canceled}, []error{context.Canceled}},
		{"stop", stopped, canceled, []error{context.Canceled, canceled}, []error{context.DeadlineExceeded}},
		{"live context", live, canceled, []error{canceled}, []error{context.Canceled, context.DeadlineExceeded}},
		{"already the context's", expired, context.DeadlineExceeded, []error{context.DeadlineExceeded}, nil},
	}
	for _, tt := range tests {
		got := ctxError(tt.ctx, tt.err)
		for _, want := range tt.is {
			if !errors.Is(got, want) {
				t.Errorf("%s: %v is not %v", tt.name, got, want)
			}
		}
		for _, no := range tt.not {
			if errors.Is(got, no) {
				t.Errorf("%s: %v is %v", tt.name, got, no)
			}
		}
	}
	if ctxError(expired, nil) != nil {
		t.Error("nil error wrapped")
	}
}

// TestReadSendsAStrayCancelledReadOnceMore: a read of enrich's pool that a
// cancel request meant for an earlier statement reached (query_canceled
// while its own context is live) is sent once more, and only once; a read
// whose own context ended, or that failed otherwise, is not.
func TestReadSendsAStrayCancelledReadOnceMore(t *testing.T) {
	t.Parallel()
	canceled := &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"}
	other := &pgconn.PgError{Code: "42P01", Message: "relation does not exist"}
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	tests := []struct {
		name   string
		ctx    context.Context
		errs   []error // f's errors, call by call (nil: it reads)
		calls  int
		wantOK bool
	}{
		{"stray cancel, then read", context.Background(), []error{canceled, nil}, 2, true},
		{"stray cancel twice", context.Background(), []error{canceled, canceled, nil}, 2, false},
		{"own deadline", expired, []error{canceled, nil}, 1, false},
		{"other error", context.Background(), []error{other, nil}, 1, false},
		{"read", context.Background(), []error{nil}, 1, true},
	}
	for _, tt := range tests {
		calls := 0
		v, err := read(tt.ctx, func() (int, error) {
			err := tt.errs[calls]
			calls++
			if err != nil {
				return 0, err
			}
			return 7, nil
		})
		if calls != tt.calls || (err == nil) != tt.wantOK || (tt.wantOK && v != 7) {
			t.Errorf("%s: %d calls, %v, %v; want %d calls, ok %v", tt.name, calls, v, err, tt.calls, tt.wantOK)
		}
	}
}
