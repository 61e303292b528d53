package worker

import (
	"context"
	"testing"
	"time"
)

// The part of a forget after the memory's transaction outlives the
// request's deadline, not the caller's shutdown: cancelled ctx, or the stop
// context of WithStop, even once the deadline has passed (a review found a
// forget past its deadline that Stop could not reach: pool close then
// waited up to the documents' 10 minutes).
func TestPastDeadlineEndsOnlyWithTheCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// end ends the caller (or not) once ctx's deadline has passed.
		end      func(cancel context.CancelFunc, stop context.CancelFunc)
		wantDone bool
	}{
		{"deadline passed only", func(context.CancelFunc, context.CancelFunc) {}, false},
		{"stop after the deadline", func(_, stop context.CancelFunc) { stop() }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stopCtx, stop := context.WithCancel(context.Background())
			defer stop()
			ctx, cancel := context.WithDeadline(WithStop(context.Background(), stopCtx), time.Now().Add(-time.Second))
			defer cancel()
			rest, release := pastDeadline(ctx)
			defer release()
			<-ctx.Done() // the deadline has passed
			tc.end(cancel, stop)
			if tc.wantDone {
				<-rest.Done() // hangs (the test's timeout) if the stop is not seen
				return
			}
			if rest.Err() != nil {
				t.Fatalf("the rest of the forget ended with the request's deadline: %v", rest.Err())
			}
		})
	}
	// Cancelled (Ctrl-C, a shutdown within the deadline): the rest ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	rest, release := pastDeadline(ctx)
	defer release()
	cancel()
	<-rest.Done()
}
