package worker

// Forget beside other work on the same stream: a second forget of the user,
// ingest (recording, erasing opted-out events, rejecting misrouted ones) and
// other users' unacknowledged events.

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/extractor"
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
	js, err := jetstream.New(nc)
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

func (e *raceEnv) count(t *testing.T, subject string) uint64 {
	t.Helper()
	n, err := subjectCount(e.ctx, e.st, subject)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// deleteMsgs documents "counting one already gone as deleted": a message
// another forget (or ingest's opt-out erase) deleted first must not fail it.
func TestDeleteMsgsCountsAnAlreadyDeletedMessage(t *testing.T) {
	e := raceSetup(t)
	seqs := e.publishN(t, "dave", 3)
	if err := e.st.DeleteMsg(e.ctx, seqs[1]); err != nil { // the other forget got there first
		t.Fatal(err)
	}
	n, err := deleteMsgs(e.ctx, e.st, seqs)
	if err != nil || n != 3 {
		t.Fatalf("deleteMsgs = %d, %v; want 3 and no error (one already gone counts as deleted)", n, err)
	}
}

// Two forgets of the same user at once (a client that timed out and sent
// the request again, as the protocol tells it to) both succeed.
func TestTwoForgetsOfTheSameUserAtOnce(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	e.publishN(t, "dave", 2000)
	type res struct {
		r   ForgetResult
		err error
	}
	out := make(chan res, 2)
	for range 2 {
		go func() {
			r, err := Forget(e.ctx, e.js, s, e.prefix, e.stream, "dave")
			out <- res{r, err}
		}()
	}
	for range 2 {
		r := <-out
		if r.err != nil {
			t.Errorf("forget = %+v, %v", r.r, r.err)
		}
	}
	if n := e.count(t, events.TurnSubject(e.prefix, "dave")); n != 0 {
		t.Errorf("dave's subject holds %d events after both forgets", n)
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
	seqs, err := appendSeqs(ctx, e.st, subj, through, nil)
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

// forgetWhileIngesting publishes dave's and bob's turns without pause while a
// worker ingests them and dave is forgotten; with optOut every third turn of
// dave's says memory:false (ingest erases it from the stream). It checks the
// forget's promise: nothing of dave's events up to the tombstone is left in
// Postgres or the stream, every later one is recorded, and bob loses nothing.
func forgetWhileIngesting(t *testing.T, optOut bool) {
	e := raceSetup(t)
	s := storetest.New(t)
	e.startWorker(t, s)
	var (
		stop      atomic.Bool
		bobSent   atomic.Int64
		published = make(chan error, 1)
		daveSeen  = make(chan struct{})
	)
	go func() {
		no := false
		for i := 0; !stop.Load(); i++ {
			d := events.Turn{ID: fmt.Sprintf("dave-%d", i), UserID: "dave", UserMessage: fmt.Sprintf("I live in city%d.", i%5), AssistantResponse: "ok", Timestamp: time.Now()}
			if optOut && i%3 == 2 {
				d.Memory = &no
			}
			if _, err := e.pub.Publish(e.ctx, d); err != nil {
				published <- err
				return
			}
			if _, err := e.pub.Publish(e.ctx, events.Turn{ID: fmt.Sprintf("bob-%d", i), UserID: "bob", UserMessage: "I live in Oslo.", AssistantResponse: "ok", Timestamp: time.Now()}); err != nil {
				published <- err
				return
			}
			bobSent.Add(1)
			if i == 300 {
				close(daveSeen)
			}
		}
		published <- nil
	}()
	select {
	case <-daveSeen:
	case err := <-published: // the publisher failed before dave's 300th turn
		t.Fatalf("publishing: %v", err)
	}
	res, ferr := Forget(e.ctx, e.js, s, e.prefix, e.stream, "dave")
	// Some more after the forget's reply, then stop.
	after := bobSent.Load() + 50
	eventstest.Eventually(t, "turns published after the forget", 2*time.Minute, func() (bool, string) {
		return bobSent.Load() >= after, ""
	})
	stop.Store(true)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatalf("forget = %+v, %v", res, ferr)
	}
	var tomb uint64
	if err := s.Pool().QueryRow(e.ctx, `SELECT stream_seq FROM tombstones WHERE user_token = $1`, events.UserToken("dave")).Scan(&tomb); err != nil {
		t.Fatal(err)
	}
	e.waitAllAcked(t)
	var before, bob int64
	if err := s.Pool().QueryRow(e.ctx, `SELECT
		(SELECT count(*) FROM turns WHERE user_id = 'dave' AND stream_seq <= $1),
		(SELECT count(*) FROM turns WHERE user_id = 'bob')`, int64(tomb)).Scan(&before, &bob); err != nil {
		t.Fatal(err)
	}
	if before != 0 {
		t.Errorf("Postgres holds %d of dave's turns at or below the tombstone %d", before, tomb)
	}
	if bob != bobSent.Load() {
		t.Errorf("bob: %d turns recorded of %d published", bob, bobSent.Load())
	}
	// The stream: none of dave's events up to the tombstone.
	left, err := appendSeqs(e.ctx, e.st, events.TurnSubject(e.prefix, "dave"), tomb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("dave's subject holds %d events at or below the tombstone %d after the forget's reply", len(left), tomb)
	}
	t.Logf("forget %+v; tombstone %d; bob %d", res, tomb, bob)
}

func TestForgetWhileIngestingLeavesNothing(t *testing.T)        { forgetWhileIngesting(t, false) }
func TestForgetWhileIngestingOptOutsLeavesNothing(t *testing.T) { forgetWhileIngesting(t, true) }

// waitAllAcked waits until ingest's durable consumer has every event of the
// stream delivered and acknowledged.
func (e *raceEnv) waitAllAcked(t *testing.T) {
	t.Helper()
	eventstest.Eventually(t, "all events acknowledged", 2*time.Minute, func() (bool, string) {
		c, err := e.js.Consumer(e.ctx, e.stream, DefaultDurable)
		if err != nil {
			return false, err.Error()
		}
		info, err := c.Info(e.ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0, fmt.Sprintf("pending=%d ack_pending=%d", info.NumPending, info.NumAckPending)
	})
}

// startWorker starts a Worker with the offline extractor on e's stream and
// returns its stop (also the test's cleanup): calling it at once leaves the
// durable consumer in place with nothing reading it.
func (e *raceEnv) startWorker(t *testing.T, s *store.Store) func() {
	t.Helper()
	w, err := New(Config{Conn: eventstest.Conn(t), Store: s, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, AckWait: time.Second, JobRetryBase: 10 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond, RetryBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	}
	t.Cleanup(stop)
	return stop
}

// Other users' events the ingest consumer delivered but that are not
// acknowledged (a crashed worker's, or handed back with a delay after a
// database error) are still redelivered and recorded after a forget of a
// user whose events lie between them.
func TestForgetKeepsOtherUsersUnackedEvents(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	e.startWorker(t, s)() // the durable consumer exists, nothing reads it
	for range 100 {
		e.publishN(t, "bob", 1)
		e.publishN(t, "dave", 1)
	}
	c, err := e.js.Consumer(e.ctx, e.stream, DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(120)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range batch.Messages() {
		switch i++; {
		case i%4 == 0:
			_ = m.NakWithDelay(500 * time.Millisecond)
		case i%4 == 1:
			_ = m.Ack() // recorded elsewhere: not expected below
		}
	}
	if batch.Error() != nil || i != 120 {
		t.Fatalf("fetched %d: %v", i, batch.Error())
	}
	acked := 0
	for j := 1; j <= 120; j++ {
		if j%4 == 1 && j%2 == 1 {
			acked++ // bob's are the odd ones
		}
	}
	res, err := Forget(e.ctx, e.js, s, e.prefix, e.stream, "dave")
	if err != nil || res.StreamEvents != 100 {
		t.Fatalf("forget = %+v, %v", res, err)
	}
	e.startWorker(t, s)
	want := int64(100 - acked)
	eventstest.Eventually(t, "bob's turns recorded", 2*time.Minute, func() (bool, string) {
		var n int64
		err := s.Pool().QueryRow(e.ctx, `SELECT count(*) FROM turns WHERE user_id = 'bob'`).Scan(&n)
		return err == nil && n == want, fmt.Sprint(n, err)
	})
}

// dave's event published on bob's subject (rejected: token mismatch) and
// not yet delivered when dave is forgotten: ingest drops it without a dead
// letter, so the forget's dead-letter pass never finds it either.
func TestForgetErasesUndeliveredMisroutedEvent(t *testing.T) {
	e := raceSetup(t)
	s := storetest.New(t)
	e.startWorker(t, s)() // the durable consumer exists, nothing reads it
	ack, err := e.js.Publish(e.ctx, events.TurnSubject(e.prefix, "bob"),
		[]byte(`{"id":"dave-on-bob","user_id":"dave","user_message":"I live in Lima.","timestamp":"2026-11-21T10:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Forget(e.ctx, e.js, s, e.prefix, e.stream, "dave"); err != nil {
		t.Fatal(err)
	}
	e.startWorker(t, s)
	e.waitAllAcked(t)
	if m, err := e.st.GetMsg(e.ctx, ack.Sequence); err == nil {
		t.Fatalf("dave's event %d (%s) is still in the turn stream after his forget: %s", ack.Sequence, m.Subject, m.Data)
	}
}

// A forget whose events another forget of the same user deleted after it
// counted them reads nothing and returns, rather than waiting for events
// that will not come until its deadline.
func TestAppendSeqsEndsWhenTheEventsAreGone(t *testing.T) {
	e := raceSetup(t)
	seqs := e.publishN(t, "dave", 3)
	subjects, held, err := userSubjects(e.ctx, e.st, e.prefix, events.UserToken("dave"))
	if err != nil || held != 3 || len(subjects) != 1 {
		t.Fatalf("userSubjects = %v, %d, %v; want dave's subject holding 3", subjects, held, err)
	}
	for _, seq := range seqs { // the other forget deletes them
		if err := e.st.DeleteMsg(e.ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	read, err := appendSeqs(ctx, e.st, subjects[0], seqs[len(seqs)-1], nil)
	if err != nil || len(read) != 0 {
		t.Fatalf("appendSeqs = %v, %v; want nothing read and no error", read, err)
	}
}
