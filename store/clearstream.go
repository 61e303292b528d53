package store

import (
	"context"
	"fmt"
	"time"
)

// StreamPosition is a place in the turn stream: a sequence, and when
// JetStream stored the event there (for where the stream stands: its last
// event, or the stream's creation time while it has held none). The zero
// value is no position known; a zero Stored, a position of an earlier
// release, compared by sequence alone.
//
// An event is at or before a position (Before) when it is stored more than
// StoredSkew before it, or at or below its sequence and stored no more
// than StoredSkew after it. Within one stream the sequence decides: stored
// times follow the storing server's clock (a cluster's leader of the
// moment, a clock stepped back), which StoredSkew allows for. The stored
// time tells streams apart: a stream deleted and created again numbers
// from 1 anew, but stores its events after every event of the old one.
// (A stream's creation time cannot: nats-server 2.9.10 reports a later one
// after a configuration update and a restart.)
type StreamPosition struct {
	Seq    uint64
	Stored time.Time
}

// StoredSkew is how far apart stored times may be without saying which
// event came first (see StreamPosition): far more than the clocks of a
// JetStream cluster's servers drift apart under NTP, far less than an
// operator takes to delete a stream, create it again and have it fill.
const StoredSkew = 2 * time.Second

// Before reports whether the event at p was published no later than the
// event at q (see StreamPosition); by sequence alone when either stored
// time is not known.
func (p StreamPosition) Before(q StreamPosition) bool {
	if p.Stored.IsZero() || q.Stored.IsZero() {
		return p.Seq <= q.Seq
	}
	pt, qt := p.stored(), q.stored()
	return pt.Before(qt.Add(-StoredSkew)) || (p.Seq <= q.Seq && !pt.After(qt.Add(StoredSkew)))
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

// skewSQL is StoredSkew as an SQL interval.
var skewSQL = fmt.Sprintf("interval '%d milliseconds'", StoredSkew.Milliseconds())

// mergeStreamPosition is the ON CONFLICT assignment of a clear table's
// position (the row aliased c), so that it covers what either clear covers
// (see StreamPosition): the later stored time, with the greater sequence
// when the two are within twice StoredSkew of each other (or the recorded
// one has no stored time), else the later one's. A clear without a position
// keeps the recorded one. Migration 042's stream_created, which this
// release no longer reads, is cleared with a position it no longer matches
// (an earlier release then judges the clear by time). The expressions read
// the row as it was.
var mergeStreamPosition = `stream_seq = CASE
		WHEN excluded.stream_stored_at IS NULL THEN c.stream_seq
		WHEN c.stream_stored_at IS NULL THEN greatest(c.stream_seq, excluded.stream_seq)
		WHEN c.stream_stored_at < excluded.stream_stored_at - 2 * ` + skewSQL + ` THEN excluded.stream_seq
		WHEN excluded.stream_stored_at < c.stream_stored_at - 2 * ` + skewSQL + ` THEN c.stream_seq
		ELSE greatest(c.stream_seq, excluded.stream_seq) END,
	stream_stored_at = greatest(c.stream_stored_at, excluded.stream_stored_at),
	stream_created = CASE WHEN excluded.stream_stored_at IS NULL THEN c.stream_created END`

// coveredByPosition is the SQL condition under which a turn at stream
// sequence seq, stored at stored, was published before the clear aliased
// cl was made (StreamPosition.Before). A sequence of 0 (none known) or a
// NULL stored time, on either side, never matches: such turns are judged
// by time alone.
func coveredByPosition(cl, seq, stored string) string {
	at := cl + `.stream_stored_at`
	return `(` + seq + ` > 0 AND ` + stored + ` IS NOT NULL AND ` + at + ` IS NOT NULL AND (` +
		stored + ` < ` + at + ` - ` + skewSQL + ` OR (` + seq + ` <= ` + cl + `.stream_seq AND ` + stored + ` <= ` + at + ` + ` + skewSQL + `)))`
}

// clearedTime is the SQL time against which the clear of context aliased cl
// judges a turn at stream sequence seq, stored at stored, by its timestamp:
// the clear's own time (own_at) when both have a stream position (the
// position covers every turn published before the clear, however it is
// stamped), else cleared_at, the clear's time or the newest item it
// deleted when that is later (a clear of an earlier release, or made while
// the stream could not be read, and an import, which has no position).
func clearedTime(cl, seq, stored string) string {
	return `(CASE WHEN ` + seq + ` > 0 AND ` + stored + ` IS NOT NULL AND ` + cl + `.stream_stored_at IS NOT NULL AND ` + cl + `.own_at IS NOT NULL
		THEN ` + cl + `.own_at ELSE ` + cl + `.cleared_at END)`
}
