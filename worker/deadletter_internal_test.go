package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestRejectedEventRedeliveredIsDeadLetteredOnce: an invalid event whose
// dead letter was stored but whose acknowledgement was lost (NATS
// restarting) comes back and is rejected again: its dead letter is stored
// once. Before, a soak found one event listed twice after a restart of
// nats-server (only opted-out events' letters were deduplicated).
func TestRejectedEventRedeliveredIsDeadLetteredOnce(t *testing.T) {
	e := raceSetup(t)
	ctx, js, st, prefix := e.ctx, e.js, e.st, e.prefix
	w, err := New(Config{Conn: js.Conn(), Store: storetest.New(t), Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: prefix, Stream: e.stream})
	if err != nil {
		t.Fatal(err)
	}
	dls, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: w.cfg.DeadLetterStream, Subjects: []string{events.DeadLetterSubjects(prefix)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), w.cfg.DeadLetterStream) })
	if _, err := js.Publish(ctx, events.TurnSubject(prefix, "alice"), []byte(`{"id":"e1","user_id":"alice","user_message":"hi\u0000","timestamp":"2026-11-30T10:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The event, and the same event delivered again once its first
	// delivery went unacknowledged.
	var msgs []jetstream.Msg
	for len(msgs) < 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if batch.Error() != nil && !errors.Is(batch.Error(), jetstream.ErrNoMessages) {
			t.Fatal(batch.Error())
		}
	}
	reason := errors.New("user_message: contains a NUL byte")
	for _, m := range msgs {
		w.reject(ctx, m, reason)
	}
	info, err := dls.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("the dead-letter stream holds %d letters of one event delivered twice, want 1", info.State.Msgs)
	}
}
