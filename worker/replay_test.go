package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// publishInterleaved publishes perUser turns for each user, interleaved, so that every
// user's events are spread over the whole stream.
func (e *env) publishInterleaved(users []string, perUser int) {
	e.t.Helper()
	for i := range perUser {
		for _, u := range users {
			e.publish(events.Turn{ID: fmt.Sprintf("%s-%d", u, i), UserID: u, ConversationID: "c",
				UserMessage: fmt.Sprintf("Note %d.", i), Timestamp: t0.Add(time.Duration(i) * time.Second)})
		}
	}
}

// turnsOf counts the turns Postgres holds for user.
func (e *env) turnsOf(user string) int64 {
	e.t.Helper()
	st, err := e.store.Stats(e.ctx, user)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.TurnsReceived
}

// TestReplaySurvivesAPurgeWhileReading: forgetting one user purges their
// subject while a replay over all users reads the stream. The replay must
// still read every remaining event of the other users and succeed.
func TestReplaySurvivesAPurgeWhileReading(t *testing.T) {
	e := setup(t)
	const perUser = 150
	e.publishInterleaved([]string{"alice", "bob", "carol"}, perUser)
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	purged := false
	p, err := worker.Replay(e.ctx, worker.ReplayConfig{
		JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream,
		BatchSize: 10, StallTimeout: time.Second,
		// Progress runs on the reading goroutine after each batch: the purge
		// happens while the consumer has more of bob's events buffered.
		Progress: func(p worker.ReplayProgress) {
			if purged || p.Read < 60 {
				return
			}
			purged = true
			if err := stream.Purge(e.ctx, jetstream.WithPurgeSubject(events.TurnSubject(e.prefix, "bob"))); err != nil {
				t.Error(err)
			}
		},
	})
	if err != nil {
		t.Fatalf("replay: %v (progress %+v)", err, p)
	}
	if !purged {
		t.Fatal("the purge did not happen")
	}
	for _, u := range []string{"alice", "carol"} {
		if n := e.turnsOf(u); n != perUser {
			t.Errorf("%s: %d turns replayed, want all %d (progress %+v)", u, n, perUser, p)
		}
	}
}

// TestReplayThatCannotFinishSaysWhatItMissed: the stream disappears while a
// replay reads it. The replay must fail and name the sequences it did not
// read, not report success.
func TestReplayThatCannotFinishSaysWhatItMissed(t *testing.T) {
	e := setup(t)
	e.publishInterleaved([]string{"alice", "bob"}, 50)
	deleted := false
	p, err := worker.Replay(e.ctx, worker.ReplayConfig{
		JetStream: e.js, Store: e.store, Prefix: e.prefix, Stream: e.stream,
		BatchSize: 10, StallTimeout: time.Second,
		Progress: func(p worker.ReplayProgress) {
			if deleted || p.Read < 30 {
				return
			}
			deleted = true
			if err := e.js.DeleteStream(e.ctx, e.stream); err != nil {
				t.Error(err)
			}
		},
	})
	var inc *worker.ReplayIncompleteError
	if !errors.As(err, &inc) {
		t.Fatalf("replay error = %v (progress %+v), want a *worker.ReplayIncompleteError", err, p)
	}
	if inc.FirstSeq <= 30 || inc.LastSeq != 100 || inc.Unread == 0 || inc.Unread > 100-30 || p.Read+inc.Unread != 100 {
		t.Errorf("incomplete = %+v after reading %d of 100; want the unread range ending at 100 and its count", inc, p.Read)
	}
	for _, want := range []string{fmt.Sprint(inc.FirstSeq), "100", fmt.Sprint(inc.Unread)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// replayOnly runs a replay with cfg on e's stream and store, no worker.
func (e *env) replayOnly(cfg worker.ReplayConfig) worker.ReplayProgress {
	e.t.Helper()
	cfg.JetStream, cfg.Store, cfg.Prefix, cfg.Stream = e.js, e.store, e.prefix, e.stream
	p, err := worker.Replay(e.ctx, cfg)
	if err != nil {
		e.t.Fatalf("replay: %v (progress %+v)", err, p)
	}
	return p
}

// TestReplayGroupsAUsersTurnsAcrossBatches: a stream interleaving users
// gives each batch about one turn of each user; replay still enqueues each
// user's turns in jobs of JobSize (here all of a user's turns in one job),
// and every turn is extracted. Recording batch by batch gave a job per user
// per batch: a third as many turns a job here, one turn a job at 1,000 users.
func TestReplayGroupsAUsersTurnsAcrossBatches(t *testing.T) {
	e := setup(t)
	users := []string{"alice", "bob", "carol"}
	const perUser = 30
	e.publishInterleaved(users, perUser)
	p := e.replayOnly(worker.ReplayConfig{BatchSize: 50, JobSize: 100})
	if p.Read != perUser*3 || p.Enqueued != perUser*3 {
		t.Fatalf("replay read %d and enqueued %d, want %d each", p.Read, p.Enqueued, perUser*3)
	}
	jobs := e.extractJobs()
	if len(jobs) != len(users) {
		t.Errorf("%d extraction jobs, want one per user (%d)", len(jobs), len(users))
	}
	for _, j := range jobs {
		var args worker.ExtractArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		if len(args.EventIDs) != perUser {
			t.Errorf("job %d of %s holds %d turns, want all %d of the user's", j.ID, args.UserID, len(args.EventIDs), perUser)
		}
		for i, id := range args.EventIDs {
			if want := fmt.Sprintf("%s-%d", args.UserID, i); id != want {
				t.Fatalf("job of %s: turn %d is %s, want %s (stream order)", args.UserID, i, id, want)
			}
		}
	}
	e.start(extractor.NewRules(), nil)
	e.waitDone(perUser * 3)
}

// TestReplayWindowBoundsMemory: a window of 20 turns records what it holds
// every 20 turns, so jobs hold at most the turns of one window.
func TestReplayWindowBoundsMemory(t *testing.T) {
	e := setup(t)
	e.publishInterleaved([]string{"alice", "bob"}, 30)
	p := e.replayOnly(worker.ReplayConfig{BatchSize: 50, JobSize: 100, Window: 20})
	if p.Enqueued != 60 {
		t.Fatalf("enqueued %d, want 60", p.Enqueued)
	}
	jobs := e.extractJobs()
	if len(jobs) != 6 {
		t.Errorf("%d jobs, want 6 (each window of 20 turns gives each of the 2 users a job)", len(jobs))
	}
	for _, j := range jobs {
		var args worker.ExtractArgs
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		if len(args.EventIDs) != 10 {
			t.Errorf("job of %s holds %d turns, want 10", args.UserID, len(args.EventIDs))
		}
	}
}

// TestWindowChunks: a window is cut into transactions of whole users where
// they fit, users in order of first appearance, each user's turns in order.
func TestWindowChunks(t *testing.T) {
	turns := func(spec string) []store.Turn {
		var out []store.Turn
		for i, u := range strings.Fields(spec) {
			out = append(out, store.Turn{UserID: u, EventID: fmt.Sprintf("%s%d", u, i)})
		}
		return out
	}
	show := func(chunks [][]store.Turn) string {
		var parts []string
		for _, c := range chunks {
			var ids []string
			for _, t := range c {
				ids = append(ids, t.EventID)
			}
			parts = append(parts, strings.Join(ids, ","))
		}
		return strings.Join(parts, " | ")
	}
	for _, tt := range []struct {
		name, in string
		size     int
		want     string
	}{
		{"empty", "", 3, ""},
		{"one user", "a a", 3, "a0,a1"},
		{"interleaved users grouped", "a b a b", 4, "a0,a2,b1,b3"},
		{"a user that does not fit starts a chunk", "a b a b c", 3, "a0,a2 | b1,b3,c4"},
		{"a user over the size is split, its rest shares", "a a a a a b", 2, "a0,a1 | a2,a3 | a4,b5"},
		{"size one", "a b a", 1, "a0 | a2 | b1"},
	} {
		if got := show(worker.WindowChunks(turns(tt.in), tt.size)); got != tt.want {
			t.Errorf("%s: windowChunks(%q, %d) = %q, want %q", tt.name, tt.in, tt.size, got, tt.want)
		}
	}
}

// TestReplaySinceReadsNothingStoredBefore: an event stored before Since is
// not replayed, also when the stream's start-time lookup delivers it
// (nats-server 2.9.10 did, after deletes of later events: an operator's
// walk saw `replay --since T` read an event stored before T).
func TestReplaySinceReadsNothingStoredBefore(t *testing.T) {
	e := setup(t)
	e.publish(events.Turn{ID: "u1-0", UserID: "u1", UserMessage: "I live in Rome.", Timestamp: t0})
	first := e.event(1)
	since := first.Time.Add(time.Millisecond)
	for i := range 2 {
		e.publish(events.Turn{ID: fmt.Sprintf("u2-%d", i), UserID: "u2", UserMessage: "Note.", Timestamp: t0})
	}
	e.deleteEvents(2, 3)
	p := e.replayOnly(worker.ReplayConfig{Users: []string{"u1"}, Since: since, DryRun: true})
	if p.Read != 0 || p.Enqueued != 0 {
		t.Fatalf("replay since %s read %d events and would extract %d, want none (u1's only event was stored at %s)", since, p.Read, p.Enqueued, first.Time)
	}
}

// event is the turn stream's message at seq.
func (e *env) event(seq uint64) *jetstream.RawStreamMsg {
	e.t.Helper()
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := stream.GetMsg(e.ctx, seq)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// deleteEvents deletes the turn stream's messages at seqs, as retention
// or an operator would.
func (e *env) deleteEvents(seqs ...uint64) {
	e.t.Helper()
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, seq := range seqs {
		if err := stream.DeleteMsg(e.ctx, seq); err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestReplayReportsProgressWhileRecordingAWindow: a window is recorded in
// transactions of at most BatchSize turns; Progress is called after each,
// with Recorded counting what is recorded so far, so that an operator sees a
// replay recording a large window advance (an audit saw 31 s without a
// progress line, "eta 1s" the last one, while 12,001 turns were recorded
// beside live ingest).
func TestReplayReportsProgressWhileRecordingAWindow(t *testing.T) {
	e := setup(t)
	users := []string{"alice", "bob", "carol", "dave"}
	e.publishInterleaved(users, 10)
	var (
		recorded []int  // Recorded of every report that moved it
		timed    = true // every report's Reading within its Elapsed
	)
	const batch = 10
	p := e.replayOnly(worker.ReplayConfig{
		BatchSize: batch, Window: 1000, // one window (or more, when the consumer pauses), transactions of one user
		Progress: func(p worker.ReplayProgress) {
			if n := len(recorded); n == 0 && p.Recorded > 0 || n > 0 && p.Recorded != recorded[n-1] {
				recorded = append(recorded, p.Recorded)
			}
			timed = timed && p.Reading > 0 && p.Reading <= p.Elapsed
		},
	})
	if !timed {
		t.Error("a progress report had no Reading, or one over its Elapsed: the rate would count the time before reading")
	}
	if p.Enqueued != 40 || p.Recorded != 40 {
		t.Fatalf("enqueued %d, recorded %d, want 40", p.Enqueued, p.Recorded)
	}
	// A transaction records at most BatchSize turns, so a report after each
	// moves Recorded by at most that. Where the window is cut is the
	// consumer's affair (it is flushed early when the consumer pauses, as
	// it can on a busy machine), so the test does not assume four
	// transactions of exactly ten.
	prev := 0
	for _, n := range recorded {
		if n-prev > batch {
			t.Fatalf("progress while recording reported recorded %v: a step of %d, over the %d turns of one transaction, so a transaction went unreported", recorded, n-prev, batch)
		}
		prev = n
	}
	if prev != 40 {
		t.Errorf("progress reported recorded %v: the last transaction was not reported", recorded)
	}
}
