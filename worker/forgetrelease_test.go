package worker_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
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
	const prefix, stream = "memory", "MEMORY_TURNS"
	js, st := releaseStream(t, eventstest.ReleaseCompose, prefix, stream)
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

// nats-server 2.11 and later answer info requests (stream info, stream
// lookups) only when no other API request waits. A forget that kept 8
// deletes in flight as a sliding window kept one waiting until its last
// delete: on 2.15.2 (secure deletes about 8 ms each) a replay's stream
// lookup beside a forget of 5,000 events waited up to 9.7 s and failed at
// nats.go's 5 s ("replay: stream ... does not store ...: context deadline
// exceeded"). The forget lets its deletes be answered every 32, and then
// lookups are answered: here 20 one after another while the user's last
// event, deleted last, is still in the stream.
func TestStreamLookupIsAnsweredDuringAForgetsDeletes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const prefix, stream = "memory", "MEMORY_TURNS"
	// A long API timeout, as a bound: the test asks for an order, not a time.
	js, st := releaseStream(t, eventstest.ReleaseNewest, prefix, stream, jetstream.WithDefaultTimeout(5*time.Minute))
	pub := events.NewPublisher(js, prefix)
	const n = 1500
	var first, last uint64
	for i := range n {
		ack, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("heavy-%d", i), UserID: "heavy", UserMessage: "I live in Oslo.", Timestamp: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = ack.Sequence
		}
		last = ack.Sequence
	}
	done := make(chan error, 1)
	go func() {
		res, err := worker.Forget(ctx, js, storetest.New(t), prefix, stream, "heavy")
		if err == nil && res.StreamEvents != n {
			err = fmt.Errorf("forget erased %d events, want %d", res.StreamEvents, n)
		}
		done <- err
	}()
	// The deletes have begun once the first event is gone (they go in
	// stream order). Message reads are not info requests: answered in turn.
	for {
		_, err := st.GetMsg(ctx, first)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("forget ended before its first delete was seen: %v", err)
		default:
		}
	}
	// One lookup may slip through a gap of a sliding window now and then
	// (every 3.4 s, median, on 2.15.2); lookups one after another each
	// wait for a gap.
	const lookups = 20
	for i := range lookups {
		if name, err := js.StreamNameBySubject(ctx, events.TurnSubjects(prefix)); err != nil || name != stream {
			t.Fatalf("stream lookup = %q, %v", name, err)
		}
		if _, err := st.GetMsg(ctx, last); errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Fatalf("%d of %d stream lookups one after another were answered before the forget's %d deletes ended", i, lookups, n)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// releaseStream starts nats-server release (eventstest.StartRelease) and
// creates memoryd's turn stream on it.
func releaseStream(t *testing.T, release, prefix, stream string, opts ...jetstream.JetStreamOpt) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	srv := eventstest.StartRelease(t, release)
	js, err := jetstream.New(srv.Conn(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	st, err := events.EnsureStream(context.Background(), js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return js, st
}

// Info requests (stream and consumer info, the stream lookups a forget, a
// start and a replay make) beside three forgets deleting at once:
// nats-server 2.11 and later answer them only when no other API request
// waits, and three forgets' deletes rarely leave a gap (on 2.15.2 a stream
// info waited 8.2 s during 3,000 deletes, 30.2 s during 6,000), past
// nats.go's 5 s: a start or a replay beside them failed, and so could a
// forget that ended its deletes before the others (its dead-letter
// stream's lookup: "run the forget again"; 1 of 3 runs here with a fourth
// forget). They get events.InfoTimeout instead of the JetStream context's
// default, which here is 1 s so that a few seconds of deletes show it.
func TestInfoRequestsBesideThreeForgetsOutwaitTheDefaultTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := eventstest.StartRelease(t, eventstest.ReleaseNewest)
	nc := srv.Conn(t)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Minute)) // the test's own requests: a bound, not a measure
	if err != nil {
		t.Fatal(err)
	}
	short, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const prefix, stream, durable = "memory", "MEMORY_TURNS", "memoryd-ingest"
	st, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, FilterSubject: events.TurnSubjects(prefix), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	// u0 has a third of the others' events: its forget ends its deletes
	// while theirs go on, and then looks its dead-letter stream up.
	pub := events.NewPublisher(js, prefix)
	counts := []int{200, 600, 600}
	var first uint64
	for i := range 600 {
		for u, n := range counts {
			if i >= n {
				continue
			}
			ack, err := pub.Publish(ctx, events.Turn{ID: fmt.Sprintf("u%d-%d", u, i), UserID: fmt.Sprintf("u%d", u), UserMessage: "I live in Oslo.", Timestamp: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if first == 0 {
				first = ack.Sequence
			}
		}
	}
	s := storetest.New(t)
	done := make(chan error, len(counts))
	for u, n := range counts {
		go func() {
			res, err := worker.Forget(ctx, short, s, prefix, stream, fmt.Sprintf("u%d", u))
			if err == nil && res.StreamEvents != uint64(n) {
				err = fmt.Errorf("forget of u%d erased %d events, want %d", u, res.StreamEvents, n)
			}
			done <- err
		}()
	}
	for { // the deletes have begun once the first event is gone
		if _, err := st.GetMsg(ctx, first); errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	for ended := 0; ended < len(counts); {
		if _, err := events.EnsureStream(ctx, short, events.StreamConfig{Prefix: prefix, Stream: stream}); err != nil {
			t.Fatalf("a start's stream check beside three forgets: %v", err)
		}
		if err := worker.CheckConsumerPrefix(ctx, short, stream, durable, prefix); err != nil {
			t.Fatalf("a start's consumer check beside three forgets: %v", err)
		}
		if _, err := worker.ConsumerDelivered(ctx, short, stream, durable); err != nil {
			t.Fatalf("the consumer's delivered sequence beside three forgets: %v", err)
		}
		for drained := false; !drained; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("a forget beside two others: %v", err)
				}
				ended++
			default:
				drained = true
			}
		}
	}
	// Each forget recorded, finished, in the forgets bucket: its record is
	// what a restore of an older database applies again.
	kv, err := js.KeyValue(ctx, worker.ForgetsBucket(stream))
	if err != nil {
		t.Fatalf("forgets bucket: %v", err)
	}
	for u := range counts {
		sum := sha256.Sum256([]byte(events.UserToken(fmt.Sprintf("u%d", u))))
		e, err := kv.Get(ctx, hex.EncodeToString(sum[:]))
		if err != nil {
			t.Fatalf("the forget of u%d is not recorded: %v", u, err)
		}
		if strings.Contains(string(e.Value()), `"unfinished":true`) {
			t.Errorf("the forget of u%d is recorded unfinished: %s", u, e.Value())
		}
	}
}
