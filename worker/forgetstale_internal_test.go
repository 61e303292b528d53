package worker

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events/eventstest"
)

// silentKV is a JetStream whose key-value lookups get no answer, as with a
// NATS credential without the forgets bucket's permission (the server
// reports the violation apart; the request waits for its context).
type silentKV struct{ jetstream.JetStream }

func (silentKV) KeyValue(ctx context.Context, _ string) (jetstream.KeyValue, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The reconcile runs with the job's whole timeout (JobTimeout, 10 minutes
// by default) on the one-worker maintenance queue: a forgets bucket that
// does not answer must not hold it (and the prune and embed sweep behind
// it) until then at every run, nor warn every minute (a review: a
// credential without $KV permission, which a forget itself tolerates).
func TestFinishStaleForgetsDoesNotWaitForABucketThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	var logs eventstest.SyncBuffer
	w := &Worker{cfg: Config{Stream: "T", StaleForgetAge: time.Nanosecond}, js: silentKV{},
		logger: slog.New(slog.NewTextHandler(&logs, nil))}
	// The job's context: before, each run ended only with it.
	job, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for range 3 {
		w.finishStaleForgets(job)
		if job.Err() != nil {
			t.Fatal("finishStaleForgets waited for the job's context to end")
		}
	}
	if n := strings.Count(logs.String(), "cannot read the forgets"); n != 1 {
		t.Errorf("warnings over 3 runs: %d; want 1:\n%s", n, logs.String())
	}
}
