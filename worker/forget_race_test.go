package worker

// The stream side of forget beside others deleting the same events (a
// second forget of the user, ingest erasing opted-out events): the reads
// and deletes forgetrace_test.go's tests rely on.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

type raceEnv struct {
	ctx            context.Context
	js             jetstream.JetStream
	st             jetstream.Stream
	pub            *events.Publisher
	prefix, stream string
	n              int
}

func raceSetup(t *testing.T) *raceEnv {
	t.Helper()
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	// The API's default 5 s was too short beside the package's parallel
	// deletes of thousands of events on a loaded machine (a walk: "did not
	// answer in time" in 1 of 3 runs).
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	st, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: prefix, Stream: stream})
	if err != nil {
		t.Fatal(err)
	}
	return &raceEnv{ctx: ctx, js: js, st: st, pub: events.NewPublisher(js, prefix), prefix: prefix, stream: stream}
}

func (e *raceEnv) publishN(t *testing.T, user string, n int) []uint64 {
	t.Helper()
	var seqs []uint64
	for i := range n {
		e.n++
		ack, err := e.pub.Publish(e.ctx, events.Turn{ID: fmt.Sprintf("%s-%d-%d", user, i, e.n), UserID: user, UserMessage: "I live in Oslo.", Timestamp: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs
}

// count is how many messages the stream holds on subject.
func (e *raceEnv) count(t *testing.T, subject string) uint64 {
	t.Helper()
	n, err := eventstest.SubjectMsgs(e.ctx, e.st, subject)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A message another forget (or ingest's opt-out erase) deleted first must
// not fail deleteMsgs, nor be counted: a forget's counts are what it deleted
// itself (protocol.md, "Forget").
func TestDeleteMsgsDoesNotCountAnAlreadyDeletedMessage(t *testing.T) {
	e := raceSetup(t)
	seqs := e.publishN(t, "dave", 3)
	if err := e.st.DeleteMsg(e.ctx, seqs[1]); err != nil { // the other forget got there first
		t.Fatal(err)
	}
	n, err := deleteMsgs(e.ctx, e.js, e.st, seqs, slog.Default())
	if err != nil || n != 2 {
		t.Fatalf("deleteMsgs = %d, %v; want 2 and no error (one already gone is not counted)", n, err)
	}
	if left := e.count(t, events.TurnSubject(e.prefix, "dave")); left != 0 {
		t.Fatalf("dave's subject holds %d events, want none", left)
	}
}

// appendSeqs, reading a user's subject while another deleter (a second
// forget, ingest's opt-out erase) removes some of its events, returns every
// event left, and ends: the deletes leave the consumer's pending count too
// high to see the last message by (it used to wait out its deadline).
func TestAppendSeqsUnderConcurrentDeletes(t *testing.T) {
	e := raceSetup(t)
	var dave, bob []uint64
	for range 1500 {
		dave = append(dave, e.publishN(t, "dave", 1)...)
		bob = append(bob, e.publishN(t, "bob", 1)...)
	}
	subj := events.TurnSubject(e.prefix, "dave")
	// As in a forget: the stream's last sequence, another user's event, so
	// that the read cannot end on reaching it; and dave's last events go
	// too, so that it ends on the stall check.
	through := bob[len(bob)-1]
	doomed := map[uint64]bool{}
	for i, s := range dave {
		if i%3 != 0 {
			doomed[s] = true
		}
	}
	done := make(chan error, 1)
	go func() {
		// From the end backwards, so the deletes meet the reader midway.
		for i := len(dave) - 1; i >= 0; i-- {
			if doomed[dave[i]] {
				if err := e.st.DeleteMsg(e.ctx, dave[i]); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute) // a bound, not a measure: the read ends a stall (5 s) after the last message
	defer cancel()
	seqs, err := appendSeqs(ctx, e.st, subj, through, nil, nil)
	if err != nil {
		t.Fatalf("appendSeqs: %v after reading %d sequences up to %d; the subject holds %d", err, len(seqs), through, e.count(t, subj))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for _, s := range seqs {
		got[s] = true
	}
	missing := 0
	for _, s := range dave {
		if !doomed[s] && !got[s] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("appendSeqs returned %d sequences; %d of dave's events left in the stream are not among them", len(seqs), missing)
	}
}

// A forget whose events another forget of the same user deleted after it
// counted them reads nothing and returns, rather than waiting for events
// that will not come until its deadline.
func TestAppendSeqsEndsWhenTheEventsAreGone(t *testing.T) {
	e := raceSetup(t)
	seqs := e.publishN(t, "dave", 3)
	subjects := userSubjects(e.prefix, events.UserToken("dave"))
	for _, seq := range seqs { // the other forget deletes them
		if err := e.st.DeleteMsg(e.ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	read, err := appendSeqs(ctx, e.st, subjects[0], seqs[len(seqs)-1], nil, nil)
	if err != nil || len(read) != 0 {
		t.Fatalf("appendSeqs = %v, %v; want nothing read and no error", read, err)
	}
}

// nats-server 2.9.10 reports no messages on a literal subject whose first
// messages (a block's worth) were deleted while others were published: a
// forget that counted the user's subject first read nothing and left the
// user's later events in the stream, answering success, and every forget
// again did the same. Forget reads the subjects whatever their counts.
func TestForgetReadsASubjectTheStreamMiscounts(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	long := strings.Repeat("I live in Oslo and I like long walks. ", 200) // ~8 KB: the head spans a file block
	publish := func(tag, user string, n int) []uint64 {
		var seqs []uint64
		for i := range n {
			ack, err := e.pub.Publish(e.ctx, events.Turn{ID: fmt.Sprintf("%s-%s-%d", tag, user, i), UserID: user, UserMessage: long, Timestamp: time.Now()})
			if err != nil {
				t.Error(err)
				return seqs
			}
			seqs = append(seqs, ack.Sequence)
		}
		return seqs
	}
	head := publish("head", "dave", 1100)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); publish("a", "dave", 150); publish("a", "erin", 150) }()
	go func() { defer wg.Done(); publish("b", "erin", 150); publish("b", "dave", 150) }()
	if _, err := deleteMsgs(e.ctx, e.js, e.st, head, slog.Default()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	subject := events.TurnSubject(e.prefix, "dave")
	info, err := e.st.Info(e.ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the stream's count for %s: %v (300 held)", subject, info.State.Subjects)
	r, err := Forget(e.ctx, e.js, s, e.prefix, e.stream, "dave")
	if err != nil {
		t.Fatal(err)
	}
	if left := e.count(t, subject); left != 0 || r.StreamEvents != 300 {
		t.Fatalf("forget deleted %d events and left %d of dave's in the stream; want 300 deleted, none left", r.StreamEvents, left)
	}
	if left := e.count(t, events.TurnSubject(e.prefix, "erin")); left != 300 {
		t.Fatalf("forget of dave left %d of erin's 300 events", left)
	}
}

// A tombstone's sequence for turns without a stored time (SeqAlone) can be
// past where the stream stands (the user's turns recorded by an earlier
// release, of a stream since created again): the purge deletes the events
// the tombstone covers, not those published after the forget under that
// sequence.
func TestPurgeTurnsKeepsEventsAfterTheTombstone(t *testing.T) {
	e := raceSetup(t)
	seqs := e.publishN(t, "alice", 3)
	second, err := e.st.GetMsg(e.ctx, seqs[1])
	if err != nil {
		t.Fatal(err)
	}
	tomb := store.Tombstone{Through: store.StreamPosition{Seq: seqs[1], Stored: second.Time}, SeqAlone: 900}
	n, err := purgeTurns(e.ctx, e.js, e.st, userSubjects(e.prefix, events.UserToken("alice")), tomb, 3, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.GetMsg(e.ctx, seqs[2]); n != 2 || err != nil {
		t.Fatalf("purge deleted %d events, the one after the tombstone's: %v; want the 2 it covers deleted, the third kept", n, err)
	}
}

// A dead letter is the forget's when the tombstone covers its event's place
// in the stream (Memoryd-Stream-Stored), also when the dead letter itself
// was stored after the forget read the stream (a rejection in flight) and
// its sequence is of a stream since created again.
func TestDeadLetterCovered(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tomb := store.Tombstone{Through: store.StreamPosition{Seq: 20, Stored: t0}, SeqAlone: 20}
	letter := func(seq uint64, eventStored time.Time) nats.Header {
		h := nats.Header{}
		h.Set(events.HeaderStreamSeq, fmt.Sprint(seq))
		if !eventStored.IsZero() {
			h.Set(events.HeaderStreamStored, eventStored.Format(time.RFC3339Nano))
		}
		return h
	}
	after := &jetstream.MsgMetadata{Timestamp: t0.Add(time.Second)}   // the dead letter stored after the forget's read
	before := &jetstream.MsgMetadata{Timestamp: t0.Add(-time.Minute)} // and before it
	for _, c := range []struct {
		name string
		h    nats.Header
		md   *jetstream.MsgMetadata
		want bool
	}{
		{"an event of the deleted stream, rejected in flight", letter(5000, t0.Add(-10*time.Second)), after, true},
		{"an event of the stream, at or below the sequence", letter(20, t0), after, true},
		{"an event published after the forget", letter(21, t0.Add(500*time.Millisecond)), after, false},
		{"a dead letter of an earlier release, after", letter(21, time.Time{}), after, false},
		{"a dead letter of an earlier release, stored before", letter(5000, time.Time{}), before, true},
	} {
		if got := deadLetterCovered(tomb, c.h, c.md); got != c.want {
			t.Errorf("%s: covered = %v, want %v", c.name, got, c.want)
		}
	}
}
