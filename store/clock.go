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
// does not step); a step of Postgres's is followed at the next reading,
// and so is a suspend of this host (the monotonic clock stops during it:
// a reading is stale once the wall clock and the monotonic one disagree
// about its age). Before the first reading it is the host's clock. It
// implements River's rivertype.TimeGenerator, so a River client given it
// (Config.Test.Time, the only hook River has for its clock) stamps and
// fetches by it. Its times carry no monotonic reading: River's durations
// are differences of two of them, exact between readings; a new reading
// moves them by its correction (milliseconds), or by a step of Postgres's
// clock, which River then sees as time passing (a backward step of X
// keeps its leader X longer, and delays its insert notifications by up to
// X: jobs are then fetched by polling).
//
// Its methods are safe for concurrent use. The zero value is ready.
type Clock struct {
	r atomic.Pointer[clockReading]
	// jumped is the last forward jump of Postgres's clock between two
	// readings (see JumpedWithin).
	jumped atomic.Pointer[clockJump]
}

// clockReading is one reading of Postgres's clock.
type clockReading struct {
	db    time.Time     // Postgres's clock at local
	local time.Time     // this host's time then, with its monotonic reading
	unc   time.Duration // half the round trip: db lies within local ± unc
}

// clockJump is a forward jump of Postgres's clock: by, seen at local.
type clockJump struct {
	by    time.Duration
	local time.Time
}

// ClockRefresh is how old the last reading may be before RefreshClock
// reads Postgres's clock again. A worker's heartbeat reads it every
// HeartbeatInterval anyway; processes without one (an enrich-only serve,
// replay, the CLI) read it when they first need it and then at most this
// often. The reading only drifts with this host's monotonic clock, a few
// parts per million, between readings.
const ClockRefresh = time.Minute

// clockExact and clockKeep decide whether a reading replaces the last:
// one whose round trip was slow (a busy server) is less exact, and is
// taken only when it is within clockExact, or no worse than the last, or
// the last is older than clockKeep.
const (
	clockExact = 10 * time.Millisecond
	clockKeep  = 30 * time.Second
)

// MaxClockJump is how far Postgres's clock may move between two readings
// beyond the time that passed here (and the readings' uncertainty) before
// the Clock counts a jump (JumpedWithin).
const MaxClockJump = time.Second

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
// reading takes the middle. A reading that finds Postgres's clock ahead
// of the last one carried forward by more than MaxClockJump (and both
// readings' uncertainty) records a jump, whether or not it replaces it.
func (c *Clock) Observe(sent, got, db time.Time) {
	rtt := max(got.Sub(sent), 0)
	next := &clockReading{db: db, local: sent.Add(rtt / 2), unc: rtt / 2}
	for {
		last := c.r.Load()
		if last != nil {
			if by := next.db.Sub(last.db) - next.local.Sub(last.local); by > MaxClockJump+next.unc+last.unc {
				c.jumped.Store(&clockJump{by: by, local: next.local})
			}
			if next.unc > clockExact && next.unc > last.unc && next.local.Sub(last.local) < clockKeep {
				return
			}
		}
		if c.r.CompareAndSwap(last, next) {
			return
		}
	}
}

// JumpedWithin returns by how much Postgres's clock last jumped forward
// between two readings (beyond the time that passed on this host's
// monotonic clock), and when a reading saw it (this host's time), if that
// was within d: Postgres's clock was stepped, or this host was suspended.
func (c *Clock) JumpedWithin(d time.Duration) (by time.Duration, at time.Time, ok bool) {
	j := c.jumped.Load()
	if j == nil || time.Since(j.local) >= d {
		return 0, time.Time{}, false
	}
	return j.by, j.local, true
}

// stale reports whether the last reading is missing, older than d, or
// from before a suspend of this host or a step of its wall clock (its age
// by the wall clock and by the monotonic one differ by more than
// MaxClockJump).
func (c *Clock) stale(d time.Duration) bool {
	r := c.r.Load()
	if r == nil {
		return true
	}
	now := time.Now()
	age := now.Sub(r.local)
	skew := now.Round(0).Sub(r.local.Round(0)) - age
	return age >= d || skew > MaxClockJump || skew < -MaxClockJump
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
	err := s.onOneConn(ctx, func(db DBTX) error {
		var at time.Time
		sent := time.Now()
		// clock_timestamp(), not now(): in a transaction now() is when
		// it began.
		if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&at); err != nil {
			return err
		}
		c.Observe(sent, time.Now(), at)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read postgres clock: %w", err)
	}
	return nil
}

// onOneConn runs fn on s's transaction, or on a connection acquired from
// the pool first, so that a reading of the clock times the statement
// alone: a wait for a connection inside its round trip would date the
// reading early by half the wait.
func (s *Store) onOneConn(ctx context.Context, fn func(DBTX) error) error {
	// Outside a transaction s.db is the pool's autocommit, which acquires
	// a connection per statement (TestClockReadingIsTimedOnItsOwnConnection).
	if _, ok := s.db.(autocommit); !ok {
		return fn(s.db)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return fn(conn)
}

// now is the time of a direct write: Postgres's by s's Clock, read first
// when it is stale. A failed read leaves the last reading (or the host's
// clock): the write's own statements then meet the same failure.
func (s *Store) now(ctx context.Context) time.Time {
	_ = s.RefreshClock(ctx)
	return s.Clock().Now().UTC()
}

// clearTime is a clear's own time: the earlier of Postgres's (now) and
// this host's. The turns a clear must cover by time are those published
// after it but stamped before it (a frontend's backlog): the stream
// position covers those published before. Turns are stamped by the
// frontends' clocks, so a clear dated late by a clock that is ahead drops
// what the user says next, silently (a clock walk: a serve 90 s fast, 10
// of 10 turns after a clear dropped; Postgres's clock ahead would do the
// same); dated early by one that is behind, it only lets such a backlog
// through for as long.
func (s *Store) clearTime(ctx context.Context) time.Time {
	pg, host := s.now(ctx), time.Now().UTC()
	if host.Before(pg) {
		return host
	}
	return pg
}
