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

// A forget erases a user's events from the turn stream while they are in
// flight, delivered a second time (ingest handed them back while the
// user was being forgotten, or a killed process held them). On
// nats-server 2.10.28 and 2.10.29 (compose.yaml's nats:2.10) such an
// event stayed in the ingest consumer's pending list for good, restarts
// included: its ack floor stopped there, and once those reached
// MaxAckPending the consumer delivered nothing more. The forget now
// acknowledges what it erased. On 2.9.10 or 2.11 and later the test passes
// either way: the server drops the entry itself.
func TestForgetReleasesErasedEventsOnTheConsumer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := eventstest.StartRelease(t, eventstest.ReleaseCompose)
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	const prefix, stream = "memory", "MEMORY_TURNS"
	st, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	// As ingest's: explicit acks, and a small MaxAckPending so that stuck
	// entries show as a consumer that delivers nothing.
	const maxAckPending = 4
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: worker.DefaultDurable, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 2 * time.Second, MaxAckPending: maxAckPending, FilterSubject: prefix + ".>"})
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(js, prefix)
	publish := func(user string, n int) {
		t.Helper()
		for i := range n {
			if _, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("%s-%d", user, i), UserID: user, UserMessage: "my cat is called Tom",
				AssistantResponse: "noted", Timestamp: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	fetch := func(n int) []jetstream.Msg { t.Helper(); return eventstest.Fetch(t, cons, n) }
	// Another user's turn first, recorded (the consumer's ack floor past
	// it), then alice's three.
	publish("carol", 1)
	if err := fetch(1)[0].DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	publish("alice", 3)
	// Delivered, handed back (ingest holds a user being forgotten so),
	// and:
	for _, m := range fetch(3) {
		if err := m.Nak(); err != nil {
			t.Fatal(err)
		}
	}
	// Delivered again and in flight (a process recording them, or one
	// killed holding them) when the forget erases them.
	fetch(3)
	s := storetest.New(t)
	res, err := worker.Forget(ctx, js, s, prefix, stream, "alice")
	if err != nil || res.StreamEvents != 3 {
		t.Fatalf("forget: %+v, %v; want 3 events erased", res, err)
	}
	// Pulls waiting past the ack wait, as ingest's: 2.10.29 then kept
	// the erased events pending.
	for range 4 {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			t.Fatalf("an erased event delivered: %s", m.Subject())
		}
	}
	eventstest.Eventually(t, "the erased events gone from the consumer's pending list", 10*time.Second, func() (bool, string) {
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 0, fmt.Sprintf("ack pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
	})
	// And the consumer delivers as before: more than MaxAckPending
	// events, each acknowledged.
	publish("bob", maxAckPending+1)
	for range maxAckPending + 1 {
		if err := fetch(1)[0].DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
