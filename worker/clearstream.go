package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
)

// TurnStreamPosition returns how the clears of a store read the turn
// stream's position (store.SetTurnStream): its last sequence and creation
// time, read from JetStream at each clear, as a forget reads the sequence
// its tombstone covers. A stream that does not exist has no position: its
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
		info := st.CachedInfo()
		return store.StreamPosition{Seq: info.State.LastSeq, Created: info.Created}, nil
	}
}

// turnStreamCreated is the creation time of the turn stream now, which the
// writes of a save carry with their turns' sequences (store.FactWrite's
// Stream). Every turn saved was recorded before this read, so it came from
// this stream or from one deleted before it was created, and was published
// before any clear that recorded a position of this stream: comparing its
// sequence with such a clear's never covers a turn published after the
// clear. Zero when it cannot be read: the writes are then judged by their
// time alone, as they were before clears recorded positions.
func (w *Worker) turnStreamCreated(ctx context.Context) time.Time {
	pos, err := TurnStreamPosition(w.js, w.cfg.Stream)(ctx)
	if err != nil {
		w.logger.Warn("cannot read the turn stream; clears cover this save's turns by their time only", "stream", w.cfg.Stream, "error", err)
		return time.Time{}
	}
	return pos.Created
}
