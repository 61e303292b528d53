package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestClockReadings: the offset and uncertainty a reading gives, and which
// readings replace the last: a slow round trip (less exact) only once the
// last reading is old.
func TestClockReadings(t *testing.T) {
	base := time.Now()
	type reading struct {
		after, rtt, ahead time.Duration // sent at base+after; the host ahead of Postgres by ahead
	}
	for _, c := range []struct {
		name            string
		readings        []reading
		want, wantUncer time.Duration
	}{
		{name: "in step", readings: []reading{{rtt: 2 * time.Millisecond}}, want: 0, wantUncer: time.Millisecond},
		{name: "host 90 s ahead", readings: []reading{{rtt: 2 * time.Millisecond, ahead: 90 * time.Second}}, want: 90 * time.Second, wantUncer: time.Millisecond},
		{name: "host 2 min behind", readings: []reading{{ahead: -2 * time.Minute}}, want: -2 * time.Minute},
		{name: "a slow round trip", readings: []reading{{rtt: 4 * time.Second, ahead: 2 * time.Second}}, want: 2 * time.Second, wantUncer: 2 * time.Second},
		{name: "a step of Postgres's clock is followed",
			readings: []reading{{rtt: time.Millisecond}, {after: 2 * time.Second, rtt: time.Millisecond, ahead: -4 * time.Minute}},
			want:     -4 * time.Minute, wantUncer: time.Millisecond / 2},
		{name: "a slow round trip does not replace an exact recent reading",
			readings: []reading{{rtt: 2 * time.Millisecond, ahead: time.Second}, {after: 2 * time.Second, rtt: 4 * time.Second, ahead: 3 * time.Second}},
			want:     time.Second, wantUncer: time.Millisecond},
		{name: "a slow round trip replaces an old reading",
			readings: []reading{{rtt: 2 * time.Millisecond, ahead: time.Second}, {after: 31 * time.Second, rtt: 4 * time.Second, ahead: 3 * time.Second}},
			want:     3 * time.Second, wantUncer: 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			var clock store.Clock
			if _, _, ok := clock.Offset(); ok || clock.NowOrNil() != nil {
				t.Fatal("a clock without a reading has an offset or a time")
			}
			for _, r := range c.readings {
				sent := base.Add(r.after)
				clock.Observe(sent, sent.Add(r.rtt), sent.Round(0).Add(r.rtt/2-r.ahead))
			}
			got, uncer, ok := clock.Offset()
			if !ok || got != c.want || uncer != c.wantUncer {
				t.Fatalf("Offset = %s ± %s (%v), want %s ± %s", got, uncer, ok, c.want, c.wantUncer)
			}
		})
	}
}

// TestClockNowFollowsPostgres: Now is the reading carried forward, not the
// host's clock; NowOrNil gives it once there is a reading.
func TestClockNowFollowsPostgres(t *testing.T) {
	var clock store.Clock
	host := time.Now()
	if d := clock.Now().Sub(host); d < 0 || d > time.Minute {
		t.Fatalf("without a reading Now is %s off the host's clock", d)
	}
	sent := time.Now()
	clock.Observe(sent, sent, sent.Round(0).Add(-time.Hour)) // Postgres an hour behind this host
	now := clock.NowOrNil()
	if now == nil {
		t.Fatal("NowOrNil = nil after a reading")
	}
	if d := time.Since(*now) - time.Hour; d < 0 || d > time.Minute {
		t.Fatalf("Now is %s off Postgres's time by the reading", d)
	}
}

// TestClearIsDatedByPostgresClock: a facts.clear takes the earlier of
// Postgres's time (the store's Clock) and the host's, and the facts.set
// after it Postgres's: a walk saw a clear through a serve 90 s fast drop
// the user's next 90 s of turns. Here the clock reads Postgres an hour
// behind this host (as for a host an hour fast): a turn stamped a minute
// after Postgres's now brings the fact back, one a minute before does
// not. Then Postgres an hour ahead: the clear takes the host's time, and
// a turn a minute after it is kept.
func TestClearIsDatedByPostgresClock(t *testing.T) {
	ctx, s := setup(t)
	sent := time.Now()
	s.Clock().Observe(sent, sent, sent.Round(0).Add(-time.Hour))
	pgNow := s.Clock().Now()
	upsertCity(t, ctx, s, "Paris", pgNow.Add(-time.Hour), "e1")
	if n, err := s.DeleteFact(ctx, "alice", "city"); err != nil || n != 1 {
		t.Fatalf("clear = %d, %v; want 1 deleted", n, err)
	}
	upsertCity(t, ctx, s, "London", pgNow.Add(-time.Minute), "e2")
	if got := cityOf(t, ctx, s); got != "<none>" {
		t.Fatalf("a turn before the clear: city = %s, want none", got)
	}
	upsertCity(t, ctx, s, "Rome", pgNow.Add(time.Minute), "e3")
	if got := cityOf(t, ctx, s); got != "Rome" {
		t.Fatalf("a turn a minute after the clear by Postgres's clock (an hour before by the host's): city = %s, want Rome", got)
	}
	// facts.set is stated at Postgres's time too: a turn an hour later by
	// that clock (the host's now) outranks it.
	if _, _, err := s.SetFact(ctx, "alice", "city", "Oslo"); err != nil {
		t.Fatal(err)
	}
	upsertCity(t, ctx, s, "Bergen", pgNow.Add(30*time.Minute), "e4")
	if got := cityOf(t, ctx, s); got != "Bergen" {
		t.Fatalf("a turn after facts.set by Postgres's clock: city = %s, want Bergen", got)
	}

	sent = time.Now()
	s.Clock().Observe(sent, sent, sent.Round(0).Add(time.Hour))
	if n, err := s.DeleteFact(ctx, "alice", "city"); err != nil || n != 1 {
		t.Fatalf("clear with Postgres's clock ahead = %d, %v; want 1 deleted", n, err)
	}
	upsertCity(t, ctx, s, "Tromsø", time.Now().Add(time.Minute), "e5")
	if got := cityOf(t, ctx, s); got != "Tromsø" {
		t.Fatalf("a turn a minute after a clear with Postgres's clock an hour ahead: city = %s, want Tromsø", got)
	}
}

// TestClockJumps: a reading that finds Postgres's clock ahead of the last
// reading carried forward, by more than MaxClockJump and both readings'
// uncertainty, records a jump (a slow reading too, though it does not
// replace the last); drift within the bound and a step back do not.
func TestClockJumps(t *testing.T) {
	for _, c := range []struct {
		name    string
		after   time.Duration // the second reading, after the first
		ahead   time.Duration // Postgres's clock ahead of where the first reading puts it
		rtt     time.Duration
		want    time.Duration
		wantHit bool
	}{
		{name: "in step", after: 2 * time.Second, rtt: time.Millisecond},
		{name: "drift within the bound", after: 2 * time.Second, ahead: 900 * time.Millisecond, rtt: time.Millisecond},
		{name: "a slow round trip within its uncertainty", after: 2 * time.Second, ahead: 2 * time.Second, rtt: 4 * time.Second},
		{name: "a step forward", after: 2 * time.Second, ahead: time.Minute, rtt: time.Millisecond, want: time.Minute, wantHit: true},
		{name: "a step forward read slowly", after: 2 * time.Second, ahead: time.Minute, rtt: 4 * time.Second, want: time.Minute, wantHit: true},
		{name: "a step back", after: 2 * time.Second, ahead: -time.Minute, rtt: time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			var clock store.Clock
			first := time.Now().Add(-c.after)
			clock.Observe(first, first, first.Round(0))
			sent := first.Add(c.after)
			clock.Observe(sent, sent.Add(c.rtt), sent.Round(0).Add(c.rtt/2+c.ahead))
			by, _, hit := clock.JumpedWithin(time.Minute)
			if hit != c.wantHit || by.Round(time.Millisecond) != c.want {
				t.Fatalf("JumpedWithin = %s, %v; want %s, %v", by, hit, c.want, c.wantHit)
			}
		})
	}
}

// TestTakeOverChecksPostgresClock: a takeover declares no process dead
// while Postgres's clock is ahead of where the store's Clock puts it (a
// step since the last reading, here a reading an hour behind): every
// heartbeat would look that much older. Read again, it does.
func TestTakeOverChecksPostgresClock(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.Pool().Exec(ctx, `INSERT INTO memoryd_processes (id, started_at, heartbeat_at)
		VALUES ('quiet', now() - interval '1 minute', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	takeOver := func() []string {
		t.Helper()
		err := s.InTx(ctx, func(_ pgx.Tx, q *store.Store) error {
			_, err := q.TakeOverJobs(ctx, 10*time.Second)
			return err
		})
		var left []string
		if err == nil {
			err = s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM memoryd_processes`).Scan(&left)
		}
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	sent := time.Now()
	s.Clock().Observe(sent, sent, sent.Round(0).Add(-time.Hour))
	if left := takeOver(); len(left) != 1 {
		t.Fatalf("with Postgres's clock an hour past the reading: processes left %v, want the quiet one kept", left)
	}
	sent = time.Now()
	s.Clock().Observe(sent, sent, sent.Round(0))
	if left := takeOver(); len(left) != 0 {
		t.Fatalf("read again: processes left %v, want the quiet one declared dead", left)
	}
}

// TestSessionSettingsOverrideTheDatabase: the pool's connections run
// memoryd's transactions at read committed whatever the database's (or the
// URL's) default isolation (a walk: serializable failed 13 of 300 turns
// with 40001), and a QuietChanges pool sets memoryd.change_notify with
// SET, not as a startup parameter (PgBouncer refuses those).
func TestSessionSettingsOverrideTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	s, err := store.Open(ctx, store.Config{URL: url + "&options=-c%20default_transaction_isolation%3Dserializable", MaxConns: 2, QuietChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var isolation, notify string
	err = s.InTx(ctx, func(tx pgx.Tx, _ *store.Store) error {
		return tx.QueryRow(ctx, `SELECT current_setting('transaction_isolation'), current_setting('memoryd.change_notify', true)`).Scan(&isolation, &notify)
	})
	if err != nil || isolation != "read committed" || notify != "off" {
		t.Fatalf("isolation %q, memoryd.change_notify %q (%v); want read committed, off", isolation, notify, err)
	}
}
