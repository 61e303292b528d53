package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// BenchmarkForgetStreamSide: a forget of a user with 2,000 events in a
// stream where another 2,000 users' events lie between theirs (nothing
// recorded in Postgres, so this is the stream side: each event found and
// overwritten). Reports the user's events removed a second.
func BenchmarkForgetStreamSide(b *testing.B) {
	const perUser = 2000
	ctx, nc, s := context.Background(), eventstest.Conn(b), storetest.New(b)
	prefix, stream := eventstest.Names(b, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
		b.Fatal(err)
	}
	pub := events.NewPublisher(js, prefix)
	var took time.Duration
	for i := range b.N {
		b.StopTimer()
		for j := range perUser {
			for _, u := range []string{"heavy", fmt.Sprintf("other-%d", j)} {
				if _, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("%s-%d-%d", u, i, j), UserID: u,
					UserMessage: "I live in Oslo and work as a nurse.", AssistantResponse: "Noted.", Timestamp: t0}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		start := time.Now()
		res, err := worker.Forget(ctx, js, s, prefix, stream, "heavy")
		took += time.Since(start)
		if err != nil || res.StreamEvents != perUser {
			b.Fatalf("forget = %+v, %v; want %d events removed", res, err, perUser)
		}
	}
	b.ReportMetric(float64(b.N*perUser)/took.Seconds(), "events/s")
}
