package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestOversizeEventIsRefusedAtPublish: an event over the size limit is
// refused by the stream memoryd creates when it is published, with the error
// code the docs name, and nothing is stored (so nothing can be
// dead-lettered); README.md and docs/protocol.md say exactly that wherever
// they give the limit.
func TestOversizeEventIsRefusedAtPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	// The limit counts the headers too: a payload of exactly the limit is
	// already over it with its Nats-Msg-Id.
	for _, n := range []int{events.MaxEventBytes, events.MaxEventBytes + 1} {
		msg := &nats.Msg{Subject: events.TurnSubject(prefix, "alice"), Data: []byte(strings.Repeat("a", n)), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("big-", n))
		_, err := js.PublishMsg(ctx, msg)
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum {
			t.Errorf("publish of %d bytes: %v, want JetStream error %d", n, err, jetstream.JSErrCodeStreamMessageExceedsMaximum)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("the stream holds %d messages after refused publishes", info.State.Msgs)
	}

	limit := fmt.Sprintf("%d KiB", events.MaxEventBytes>>10)
	code := fmt.Sprint(int(jetstream.JSErrCodeStreamMessageExceedsMaximum))
	for _, file := range []string{"README.md", "docs/protocol.md"} {
		data, err := os.ReadFile("../../" + file)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, para := range strings.Split(string(data), "\n\n") {
			para = strings.Join(strings.Fields(para), " ")
			if !strings.Contains(para, limit) {
				continue
			}
			found = true
			if !strings.Contains(para, "at publish") || !strings.Contains(para, code) {
				t.Errorf("%s gives the %s limit without saying the stream refuses a larger event at publish with error %s: %q", file, limit, code, para)
			}
		}
		if !found {
			t.Errorf("%s does not give the %s event limit", file, limit)
		}
	}
}
