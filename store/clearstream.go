package store

import (
	"cmp"
	"context"
	"fmt"
	"time"
)

// StreamPosition is a place in the turn stream: a sequence, and when
// JetStream stored the event there (for where the stream stands: its last
// event, or the stream's creation time while it has held none). Positions
// are ordered by stored time, then by sequence (Compare): a stream deleted
// and created again numbers from 1 anew, but stores its events after every
// event of the old one. (A stream's creation time cannot tell the two
// apart: nats-server 2.9.10 reports a later one after a configuration
// update and a restart.) The order is the NATS server's clock, as
// JetStream's own MaxAge and start-time consumers are. The zero value is no
// position known; a zero Stored, a position of an earlier release.
type StreamPosition struct {
	Seq    uint64
	Stored time.Time
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
	p.Stored = p.stored()
	return p, nil
}

// Compare orders positions as their events were stored: by stored time,
// then by sequence; by sequence alone when either stored time is not known.
func (p StreamPosition) Compare(q StreamPosition) int {
	if !p.Stored.IsZero() && !q.Stored.IsZero() {
		if c := p.stored().Compare(q.stored()); c != 0 {
			return c
		}
	}
	return cmp.Compare(p.Seq, q.Seq)
}

// Later is the later of p and q (Compare). When only one stored time is
// known, it is that time with the greater sequence, for the positions
// compared by sequence alone: use it only when the known time is where the
// stream stands now, later than every event stored before.
func (p StreamPosition) Later(q StreamPosition) StreamPosition {
	if p.Stored.IsZero() != q.Stored.IsZero() {
		known := p.Stored
		if known.IsZero() {
			known = q.Stored
		}
		return StreamPosition{Seq: max(p.Seq, q.Seq), Stored: known}
	}
	if p.Compare(q) >= 0 {
		return p
	}
	return q
}

// storedOrNil is p's stored time, or nil (NULL) when it is not known.
func (p StreamPosition) storedOrNil() *time.Time {
	if p.Stored.IsZero() {
		return nil
	}
	t := p.stored()
	return &t
}

// stored is p's stored time as Postgres keeps it (UTC, microseconds), so
// that a time read from JetStream compares equal with the same time read
// back from a table.
func (p StreamPosition) stored() time.Time {
	if p.Stored.IsZero() {
		return time.Time{}
	}
	return p.Stored.UTC().Truncate(time.Microsecond)
}

// streamPosition is the position of a row's stream_seq and
// stream_stored_at columns (NULL: not known).
func streamPosition(seq int64, stored *time.Time) StreamPosition {
	p := StreamPosition{Seq: uint64(max(seq, 0))}
	if stored != nil {
		p.Stored = stored.UTC()
	}
	return p
}

// laterPosition is the SQL condition under which the position of the
// clear being recorded (excluded) is later than the recorded one (c): a
// clear without a position (no stored time) never is; one is later than a
// row without a position, or of an earlier release (no stored time).
const laterPosition = `(excluded.stream_stored_at IS NOT NULL AND (c.stream_stored_at IS NULL OR
	(excluded.stream_stored_at, excluded.stream_seq) > (c.stream_stored_at, c.stream_seq)))`

// mergeStreamPosition is the ON CONFLICT assignment of a clear table's
// position (the row aliased c): the later of the two (laterPosition), which
// covers every turn the earlier one covers. Migration 042's
// stream_created, which this release no longer reads, is cleared with a
// position it no longer matches (an earlier release judges the clear by
// time). The expressions read the row as it was.
const mergeStreamPosition = `stream_seq = CASE WHEN ` + laterPosition + ` THEN excluded.stream_seq ELSE c.stream_seq END,
	stream_stored_at = CASE WHEN ` + laterPosition + ` THEN excluded.stream_stored_at ELSE c.stream_stored_at END,
	stream_created = CASE WHEN ` + laterPosition + ` THEN NULL ELSE c.stream_created END`

// coveredByPosition is the SQL condition under which a turn at stream
// sequence seq, stored at stored, was published before the clear aliased
// cl was made: its position is not after the clear's (see StreamPosition).
// A sequence of 0 (none known) or a NULL stored time, on either side,
// never matches: such turns are judged by time alone.
func coveredByPosition(cl, seq, stored string) string {
	return `(` + seq + ` > 0 AND (` + stored + `, ` + seq + `) <= (` + cl + `.stream_stored_at, ` + cl + `.stream_seq))`
}
