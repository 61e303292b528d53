package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

// TestPublisherSizeBoundaryIsExact: a turn whose JSON plus headers as sent
// is exactly MaxEventBytes is stored; the stream refuses one byte more
// (10054), which Publish refuses before sending.
func TestPublisherSizeBoundaryIsExact(t *testing.T) {
	ctx, js, prefix, _ := setupStream(t)
	for _, extra := range []int{0, 1} {
		turn := events.Turn{ID: "edge" + string(rune('a'+extra)), UserID: "alice", UserMessage: "hi", Timestamp: time.Now().UTC()}
		hdr := len("NATS/1.0\r\n\r\n") + len(jetstream.MsgIDHeader+": \r\n") + len(events.MsgID(turn.UserID, turn.ID))
		data, _ := json.Marshal(turn)
		need := events.MaxEventBytes - hdr - len(data) + extra
		turn.AssistantResponse = strings.Repeat(`"`, need/2) + strings.Repeat("a", need%2)
		data, _ = json.Marshal(turn)
		if len(data)+hdr != events.MaxEventBytes+extra {
			t.Fatalf("setup: %d", len(data)+hdr)
		}
		_, err := events.NewPublisher(js, prefix).Publish(ctx, turn)
		if extra == 0 && err != nil {
			t.Errorf("turn of exactly the limit with headers: %v; want stored", err)
		}
		if extra == 1 {
			if !errors.Is(err, events.ErrInvalid) {
				t.Errorf("turn 1 byte over: %v; want ErrInvalid", err)
			}
			// and the stream itself refuses it
			msg := &nats.Msg{Subject: events.TurnSubject(prefix, turn.UserID), Data: data, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, events.MsgID(turn.UserID, turn.ID))
			var apiErr *jetstream.APIError
			if _, err := js.PublishMsg(ctx, msg); !errors.As(err, &apiErr) || apiErr.ErrorCode != 10054 {
				t.Errorf("raw publish 1 byte over: %v; want 10054", err)
			}
		}
	}
}

// TestIDsDifferingInEdgeSpaceAreNotDuplicates: Validate accepts an id with
// white space at its ends, but nats.go trims header values as it sends them,
// so "x" and "x " share a Nats-Msg-Id and the second turn is dropped as a
// duplicate.
func TestIDsDifferingInEdgeSpaceAreNotDuplicates(t *testing.T) {
	ctx, js, prefix, _ := setupStream(t)
	p := events.NewPublisher(js, prefix)
	for _, ids := range [][2]string{{"x", "x "}, {"y", "\ty"}, {"a b", "a\nb"}} {
		a := events.Turn{ID: ids[0], UserID: "alice", UserMessage: "I live in Porto", Timestamp: time.Now().UTC()}
		b := a
		b.ID, b.UserMessage = ids[1], "I work as a nurse"
		if _, err := p.Publish(ctx, a); err != nil {
			t.Fatal(err)
		}
		ack, err := p.Publish(ctx, b)
		if err == nil && ack.Duplicate {
			t.Errorf("turn %q, valid and distinct from %q, was acknowledged as a duplicate and not stored", b.ID, a.ID)
		}
		if err != nil && !errors.Is(err, events.ErrInvalid) {
			t.Fatal(err)
		}
	}
}
