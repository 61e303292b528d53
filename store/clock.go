package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Clock is Postgres's clock as this process reads it: the last reading of
// Postgres's now() carried forward on this host's monotonic clock. Every
// time memoryd writes that another process, or Postgres, compares with its
// own (the times River schedules jobs at, snoozes and retries them by, a
// clear's time, a direct write's) comes from it, so that a host whose
// clock is off delays no job and clears no turn it should not: a walk saw
// every turn of a serve 90 s ahead wait 90 s when River stamped its jobs
// by the host's clock, and a clear made there drop the user's next 90 s of
// turns.
//
// A step of the host's wall clock does not move it (the monotonic clock
// does not step); a step of Postgres's is followed at the next reading.
// Before the first reading it is the host's clock. It implements River's
// rivertype.TimeGenerator, so a River client given it (Config.Test.Time,
// the only hook River has for its clock) stamps and fetches by it; its
// times carry no monotonic reading, which River's durations do not need:
// they are differences of two times this clock gave.
//
// Its methods are safe for concurrent use. The zero value is ready.
type Clock struct {
	r atomic.Pointer[clockReading]
}

// clockReading is one reading of Postgres's clock.
type clockReading struct {
	db    time.Time     // Postgres's clock at local
	local time.Time     // this host's time then, with its monotonic reading
	unc   time.Duration // half the round trip: db lies within local ± unc
}

// ClockRefresh is how old the last reading may be before RefreshClock
// reads Postgres's clock again. A worker's heartbeat reads it every
// HeartbeatInterval anyway; processes without one (an enrich-only serve,
// replay, the CLI) read it when they first need it and then at most this
// often. The reading only drifts with this host's monotonic clock, a few
// parts per million, between readings.
const ClockRefresh = time.Minute

// clockSlack and clockKeep decide whether a reading replaces the last:
// one whose round trip was slow (a busy server, a long queue) is less
// exact, and is taken only when it is no worse than the last by more than
// clockSlack, or the last is older than clockKeep.
const (
	clockSlack = 10 * time.Millisecond
	clockKeep  = 30 * time.Second
)

// Now returns Postgres's time now as this process reads it (the host's
// clock before the first reading).
func (c *Clock) Now() time.Time {
	r := c.r.Load()
	if r == nil {
		return time.Now()
	}
	return r.db.Add(time.Since(r.local))
}

// NowOrNil returns Now, or nil before the first reading: a River client
// then takes its times from Postgres's now() in SQL where it can, as it
// does with no clock given.
func (c *Clock) NowOrNil() *time.Time {
	if c.r.Load() == nil {
		return nil
	}
	t := c.Now()
	return &t
}

// Offset returns how far this host's clock is ahead of Postgres's (behind
// when negative) at the last reading, and that reading's uncertainty
// (half its round trip); ok is false before the first reading.
func (c *Clock) Offset() (offset, uncertainty time.Duration, ok bool) {
	r := c.r.Load()
	if r == nil {
		return 0, 0, false
	}
	return r.local.Round(0).Sub(r.db), r.unc, true
}

// Observe records a reading: a statement sent at sent, whose reply came at
// got (both from time.Now, with their monotonic readings), read Postgres's
// clock as db. Postgres read it somewhere within the round trip; the
// reading takes the middle.
func (c *Clock) Observe(sent, got, db time.Time) {
	rtt := max(got.Sub(sent), 0)
	next := &clockReading{db: db, local: sent.Add(rtt / 2), unc: rtt / 2}
	for {
		last := c.r.Load()
		if last != nil && next.unc > last.unc+clockSlack && next.local.Sub(last.local) < clockKeep {
			return
		}
		if c.r.CompareAndSwap(last, next) {
			return
		}
	}
}

// stale reports whether the last reading is missing or older than d.
func (c *Clock) stale(d time.Duration) bool {
	r := c.r.Load()
	return r == nil || time.Since(r.local) >= d
}

// Clock returns the clock shared by every Store on s's pool (see Clock).
func (s *Store) Clock() *Clock { return &s.hooks.clock }

// RefreshClock reads Postgres's clock into s's Clock when the last reading
// is older than ClockRefresh (or there is none), on s's connection or
// transaction. An error leaves the clock as it was.
func (s *Store) RefreshClock(ctx context.Context) error {
	c := s.Clock()
	if !c.stale(ClockRefresh) {
		return nil
	}
	var db time.Time
	sent := time.Now()
	// clock_timestamp(), not now(): in a transaction now() is when it
	// began.
	if err := s.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		return fmt.Errorf("read postgres clock: %w", err)
	}
	c.Observe(sent, time.Now(), db)
	return nil
}

// now is the time of a direct write, a clear or a check against the
// future: Postgres's by s's Clock, read first when it is stale. A failed
// read leaves the last reading (or the host's clock): the write's own
// statements then meet the same failure.
func (s *Store) now(ctx context.Context) time.Time {
	_ = s.RefreshClock(ctx)
	return s.Clock().Now().UTC()
}
