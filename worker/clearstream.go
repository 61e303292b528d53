package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// TurnStreamPosition returns how the clears of a store read the turn
// stream's position (store.SetTurnStream): its last event's sequence and
// stored time, read from JetStream at each clear, as a forget reads the
// position its tombstone covers. A stream that does not exist has no position: its
// clears are judged by time alone. An empty stream name is the default.
func TurnStreamPosition(js jetstream.JetStream, stream string) store.TurnStreamFunc {
	if stream == "" {
		stream = events.DefaultStream
	}
	return func(ctx context.Context) (store.StreamPosition, error) {
		st, err := js.Stream(ctx, stream) // reads the stream's info
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return store.StreamPosition{}, nil
		}
		if err != nil {
			return store.StreamPosition{}, fmt.Errorf("stream %s: %w", stream, err)
		}
		return streamPosition(st.CachedInfo()), nil
	}
}

// streamPosition is where the stream of info stands: its last event's
// sequence and stored time, or, while it has held none, its creation time
// (every event it will hold is stored later; see store.StreamPosition).
func streamPosition(info *jetstream.StreamInfo) store.StreamPosition {
	if info.State.LastSeq == 0 {
		return store.StreamPosition{Stored: info.Created}
	}
	return store.StreamPosition{Seq: info.State.LastSeq, Stored: info.State.LastTime}
}
