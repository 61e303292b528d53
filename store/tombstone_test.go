package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

func TestTombstoneCovers(t *testing.T) {
	last := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC) // nanoseconds, as JetStream reports
	at := func(seq uint64, stored time.Time) store.StreamPosition {
		return store.StreamPosition{Seq: seq, Stored: stored}
	}
	tomb := store.Tombstone{Through: at(90, last), SeqAlone: 900}
	legacy := store.Tombstone{Through: at(90, time.Time{}), SeqAlone: 90}
	for _, c := range []struct {
		name string
		tomb store.Tombstone
		p    store.StreamPosition
		want bool
	}{
		{"its own event", tomb, at(90, last), true},
		{"read back in microseconds", tomb, at(90, last.Truncate(time.Microsecond)), true},
		{"in another time zone", tomb, at(90, last.In(time.FixedZone("x", 3600))), true},
		{"before it", tomb, at(1, last.Add(-time.Minute)), true},
		{"after it", tomb, at(91, last.Add(time.Millisecond)), false},
		{"after it, in the same microsecond", tomb, at(91, last.Add(1)), false},
		{"a stream deleted before the forget's", tomb, at(5000, last.Add(-time.Hour)), true},
		{"a stream created after the forget", tomb, at(1, last.Add(time.Hour)), false},
		{"a turn of an earlier release", tomb, at(900, time.Time{}), true},
		{"a turn of an earlier release, after", tomb, at(901, time.Time{}), false},
		{"a turn of the new stream under the earlier release's sequences", tomb, at(95, last.Add(time.Second)), false},
		{"a tombstone of an earlier release", legacy, at(90, last.Add(time.Hour)), true},
		{"a tombstone of an earlier release, after", legacy, at(91, last.Add(-time.Hour)), false},
		{"no sequence", tomb, at(0, last.Add(time.Hour)), true},
		// Within one stream the sequence decides: stored times follow the
		// storing server's clock (a cluster's new leader 20 ms behind the
		// old one, a clock stepped back).
		{"before it, stored later by a clock 20 ms ahead", tomb, at(89, last.Add(20*time.Millisecond)), true},
		{"before it, stored 1.5 s later by a clock stepped back", tomb, at(80, last.Add(1500*time.Millisecond)), true},
		{"after it, stored earlier by a clock stepped back", tomb, at(91, last.Add(-time.Second)), false},
		{"a stream created again, within the skew", tomb, at(3, last.Add(time.Second)), true},
	} {
		if got := c.tomb.Covers(c.p); got != c.want {
			t.Errorf("%s: Covers(%+v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

// A forget's tombstone is the latest of where the stream stood, the
// user's tombstone and the user's latest turn recorded; a turn recorded
// by an earlier release (no stored time) adds its sequence.
func TestForgetTombstoneAcrossStreams(t *testing.T) {
	ctx, s := setup(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC)
	at := func(seq uint64, stored time.Time) store.StreamPosition {
		return store.StreamPosition{Seq: seq, Stored: stored}
	}
	record := func(id string, p store.StreamPosition) {
		t.Helper()
		if _, err := s.InsertTurns(ctx, []store.Turn{{EventID: id, UserID: "alice", UserMessage: id, TurnAt: t0, Placed: p}}); err != nil {
			t.Fatal(err)
		}
	}
	forget := func(through store.StreamPosition) store.Tombstone {
		t.Helper()
		_, tomb, err := s.ForgetUser(ctx, "alice", "alice", through, store.RiverJobs{})
		if err != nil {
			t.Fatal(err)
		}
		return tomb
	}
	same := func(got, want store.StreamPosition) bool {
		return got.Seq == want.Seq && got.Stored.Equal(want.Stored.Truncate(time.Microsecond))
	}
	for _, c := range []struct {
		name      string
		turns     []store.StreamPosition
		through   store.StreamPosition
		want      store.StreamPosition
		wantAlone uint64 // what turns without a stored time are compared with
	}{
		{"a turn recorded past where the stream stood", []store.StreamPosition{at(120, t0.Add(time.Second))}, at(100, t0), at(120, t0.Add(time.Second)), 120},
		{"a second forget, earlier in the stream, keeps it", nil, at(110, t0.Add(time.Millisecond)), at(120, t0.Add(time.Second)), 120},
		// The stream is created again: a turn of the old one is still
		// recorded, with a sequence past the new stream's.
		{"the stream created again", []store.StreamPosition{at(500, t0.Add(2*time.Second))}, at(3, t0.Add(time.Hour)), at(3, t0.Add(time.Hour)), 120},
		// A turn of an earlier release, maybe of a stream since created
		// again: its sequence counts for turns without a stored time only,
		// not for the new stream's turns stored just after the forget (an
		// upgrade walk lost 13 turns published after the forget answered).
		{"a turn of an earlier release", []store.StreamPosition{at(700, time.Time{})}, at(4, t0.Add(2*time.Hour)), at(4, t0.Add(2*time.Hour)), 700},
		{"an empty stream: its creation time", nil, at(0, t0.Add(3*time.Hour)), at(0, t0.Add(3*time.Hour)), 700},
		{"where the stream stood not known in time: by sequence", []store.StreamPosition{at(9, t0.Add(4*time.Hour))}, at(5, time.Time{}), at(700, time.Time{}), 700},
	} {
		for i, p := range c.turns {
			record(c.name+string(rune('a'+i)), p)
		}
		if got := forget(c.through); !same(got.Through, c.want) || got.SeqAlone != c.wantAlone {
			t.Errorf("%s: tombstone = %+v, alone %d; want %+v, alone %d", c.name, got.Through, got.SeqAlone, c.want, c.wantAlone)
		}
	}
	// Read back as ingest and extraction read it.
	tombs, err := s.LockUsers(ctx, []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tombs["alice"]; got.SeqAlone != 700 || got.Through.Seq != 700 || !got.Through.Stored.IsZero() {
		t.Fatalf("tombstone read back: %+v", got)
	}
}

// A forget by a process of the earlier release (rolling upgrade) raises a
// tombstone's sequence alone: its stored time no longer goes with it, and
// the tombstone covers by sequence, as that release's own checks do.
// Otherwise the turns published between the two forgets (stored after the
// first one's time) would not be covered.
func TestTombstoneRaisedByAnEarlierRelease(t *testing.T) {
	ctx, s := setup(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, _, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{Seq: 10, Stored: t0}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	// The earlier release's forget, as it writes the tombstone.
	if _, err := s.Pool().Exec(ctx, `INSERT INTO tombstones AS t (user_token, stream_seq) VALUES ('alice', 50)
		ON CONFLICT (user_token) DO UPDATE SET stream_seq = greatest(t.stream_seq, excluded.stream_seq), forgotten_at = now()`); err != nil {
		t.Fatal(err)
	}
	tombs, err := s.LockUsers(ctx, []string{"alice"})
	if err != nil {
		t.Fatal(err)
	}
	between := store.StreamPosition{Seq: 30, Stored: t0.Add(time.Minute)} // published between the two forgets
	if tomb := tombs["alice"]; !tomb.Covers(between) || tomb.Covers(store.StreamPosition{Seq: 51, Stored: t0.Add(2 * time.Minute)}) {
		t.Fatalf("tombstone %+v: covers %+v: %v, want true; and not a turn at 51", tomb, between, tomb.Covers(between))
	}
	// The same when the earlier release's forget leaves the sequence as it
	// was (a stream created again since: its sequence is lower).
	if _, _, err := s.ForgetUser(ctx, "bob", "bob", store.StreamPosition{Seq: 100, Stored: t0}, store.RiverJobs{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO tombstones AS t (user_token, stream_seq) VALUES ('bob', 20)
		ON CONFLICT (user_token) DO UPDATE SET stream_seq = greatest(t.stream_seq, excluded.stream_seq), forgotten_at = now()`); err != nil {
		t.Fatal(err)
	}
	if tombs, err = s.LockUsers(ctx, []string{"bob"}); err != nil {
		t.Fatal(err)
	}
	newStream := store.StreamPosition{Seq: 15, Stored: t0.Add(time.Hour)} // published before the second forget
	if tomb := tombs["bob"]; !tomb.Covers(newStream) {
		t.Fatalf("tombstone %+v does not cover %+v, published before the earlier release's forget", tomb, newStream)
	}
	// A forget of this release records a time that goes with its sequence
	// again.
	_, tomb, err := s.ForgetUser(ctx, "alice", "alice", store.StreamPosition{Seq: 60, Stored: t0.Add(3 * time.Minute)}, store.RiverJobs{})
	if err != nil || tomb.Through.Seq != 60 || tomb.Through.Stored.IsZero() {
		t.Fatalf("tombstone after a forget of this release: %+v, %v; want 60 with its stored time", tomb, err)
	}
}
