package worker

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// A forget whose events another forget of the same user deleted after it
// counted them reads nothing and returns, rather than waiting for events
// that will not come until its deadline.
func TestAppendSeqsEndsWhenTheEventsAreGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, prefix)
	for _, id := range []string{"d1", "d2", "d3"} {
		if _, err := pub.Publish(ctx, events.Turn{ID: id, UserID: "dave", UserMessage: "hi", Timestamp: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	subjects, held, err := userSubjects(ctx, st, prefix, events.UserToken("dave"))
	if err != nil || held != 3 || len(subjects) != 1 {
		t.Fatalf("userSubjects = %v, %d, %v; want dave's subject holding 3", subjects, held, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The other forget deletes them.
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		if err := st.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	seqs, err := appendSeqs(rctx, st, subjects[0], info.State.LastSeq, nil)
	if err != nil || len(seqs) != 0 {
		t.Fatalf("appendSeqs = %v, %v; want nothing read and no error", seqs, err)
	}
}
