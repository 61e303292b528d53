package worker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// A consumer an earlier memoryd left with erased events pending for good
// (nats-server 2.10.29: erased after a redelivery, before releaseErased)
// is released at the worker's start: healErased acknowledges the deleted
// events above its ack floor, and the events still pending stay.
func TestHealErasedReleasesWhatAnEarlierVersionLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := eventstest.StartRelease(t, eventstest.ReleaseCompose)
	js, err := jetstream.New(srv.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	st, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: "memory", Stream: "MEMORY_TURNS"})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: DefaultDurable, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 2 * time.Second, FilterSubject: "memory.>"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, fmt.Sprintf("memory.turns.u%d", i), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(n int) []jetstream.Msg { t.Helper(); return eventstest.Fetch(t, cons, n) }
	// Events 2 and 3 handed back and delivered again, then erased while
	// held (an earlier memoryd's forget, before releaseErased); the
	// others acknowledged.
	for _, m := range fetch(5) {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.Sequence.Stream == 2 || md.Sequence.Stream == 3 {
			_ = m.Nak()
		} else if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range fetch(2) {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SecureDeleteMsg(ctx, md.Sequence.Stream); err != nil {
			t.Fatal(err)
		}
	}
	// Pulls waiting past their ack wait: 2.10.29 then keeps the erased
	// events pending (earlier and later releases drop them).
	for range 4 {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range b.Messages() {
			t.Fatalf("an erased event delivered: %s", m.Subject())
		}
	}
	pending := func() (int, string) {
		info, err := cons.Info(ctx)
		if err != nil {
			return -1, err.Error()
		}
		return info.NumAckPending, fmt.Sprintf("ack pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
	}
	if n, state := pending(); n != 2 {
		t.Fatalf("%s before the heal; want the 2 erased events stuck, as nats-server %s keeps them", state, eventstest.ReleaseCompose)
	}
	var logs bytes.Buffer
	w := &Worker{js: js, cfg: Config{Durable: DefaultDurable}, logger: slog.New(slog.NewTextHandler(&logs, nil))}
	// A context without a deadline, as a serve's start has.
	w.healErased(ctx, cons, st)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the heal warned: %s", logs.String())
	}
	eventstest.Eventually(t, "no erased event pending", 10*time.Second, func() (bool, string) {
		n, state := pending()
		return n == 0, state
	})
	// An event in flight (delivered, not erased) is left pending.
	if _, err := js.Publish(ctx, "memory.turns.u9", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	held := fetch(1)[0]
	w.healErased(ctx, cons, st)
	if n, state := pending(); n != 1 {
		t.Errorf("after a heal with an event in flight: %s; want it pending", state)
	}
	if err := held.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
}
