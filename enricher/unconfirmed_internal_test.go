package enricher

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestUnconfirmedDescriptionNamesTheCause: the 500 of a write whose
// commit was not confirmed says why, after the start the protocol
// documents: a timeout with its bound (the commit's own, or the request's
// budget for a single statement), memoryd stopping, or the lost
// connection. Before, every cause read "not confirmed within 5s".
func TestUnconfirmedDescriptionNamesTheCause(t *testing.T) {
	t.Parallel()
	const start, end = "memory store did not confirm the write: ", " and may have been done; read it back before sending it again"
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"commit past its bound", &store.CommitTimeoutError{Within: 5 * time.Second, Err: context.DeadlineExceeded},
			"its commit was not confirmed within 5s"},
		{"connection lost during the commit", fmt.Errorf("%w: the connection was lost during the commit: %w", store.ErrCommitUnconfirmed, io.ErrUnexpectedEOF),
			"its commit lost its database connection before it was confirmed"},
		{"statement past the request's budget", fmt.Errorf("%w: the connection was lost once the statement was sent: timeout: %w", store.ErrCommitUnconfirmed, context.DeadlineExceeded),
			"its commit was not confirmed within 10s"},
		{"statement cut by a stop", fmt.Errorf("%w: the connection was lost once the statement was sent: %w", store.ErrCommitUnconfirmed, context.Canceled),
			"its commit was cut off by memoryd stopping"},
	} {
		got := unconfirmedDescription(tt.err, 10*time.Second)
		if want := start + tt.want + end; got != want {
			t.Errorf("%s: %q; want %q", tt.name, got, want)
		}
	}
}
