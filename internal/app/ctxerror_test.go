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
