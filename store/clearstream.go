package store

import (
	"context"
	"fmt"
	"time"
)

// StreamPosition is where the turn stream stood: its last sequence and its
// creation time. The creation time tells a stream from one deleted and
// created again under the same name, whose sequences start over at 1.
// The zero value is no position known.
type StreamPosition struct {
	Seq     uint64
	Created time.Time
}

// TurnStreamFunc reads the turn stream's position now.
type TurnStreamFunc func(context.Context) (StreamPosition, error)

// SetTurnStream sets how the clears made through every Store sharing s's
// pool (DeleteContext, DeleteFact, UpdateContext) read the turn stream's
// position, which they record so that they cover every turn the stream
// held, whatever its timestamp (nil removes it: clears are then judged by
// time alone). Set it before the clears it must see start.
func (s *Store) SetTurnStream(f TurnStreamFunc) {
	if f == nil {
		s.hooks.stream.Store(nil)
		return
	}
	s.hooks.stream.Store(&f)
}

// turnStream reads the turn stream's position for a clear, before its
// transaction: a turn published after the read is judged by its time.
func (s *Store) turnStream(ctx context.Context) (StreamPosition, error) {
	f := s.hooks.stream.Load()
	if f == nil {
		return StreamPosition{}, nil
	}
	p, err := (*f)(ctx)
	if err != nil {
		return StreamPosition{}, fmt.Errorf("turn stream: %w", err)
	}
	p.Created = p.Created.UTC().Truncate(time.Microsecond) // as Postgres keeps it
	return p, nil
}

// createdOrNil is p's creation time, or nil (NULL) when p is no position.
func (p StreamPosition) createdOrNil() *time.Time {
	if p.Seq == 0 || p.Created.IsZero() {
		return nil
	}
	return &p.Created
}

// mergeStreamPosition is the ON CONFLICT assignment of a clear table's
// position (the row aliased c): a clear without a position keeps the
// recorded one; one in another stream (created again since) replaces it,
// the old sequences meaning nothing in the new stream; else the later
// sequence wins. Both expressions read the row as it was.
const mergeStreamPosition = `stream_seq = CASE
		WHEN excluded.stream_created IS NULL THEN c.stream_seq
		WHEN excluded.stream_created IS DISTINCT FROM c.stream_created THEN excluded.stream_seq
		ELSE greatest(c.stream_seq, excluded.stream_seq) END,
	stream_created = coalesce(excluded.stream_created, c.stream_created)`

// coveredByPosition is the SQL condition under which a turn at stream
// sequence seq, in the stream created at created, was in the stream when
// the clear aliased cl was made. A sequence of 0 (none known) or a NULL
// creation time never matches: such turns are judged by time alone.
func coveredByPosition(cl, seq, created string) string {
	return `(` + seq + ` > 0 AND ` + seq + ` <= ` + cl + `.stream_seq AND ` + cl + `.stream_created = ` + created + `)`
}
