package events_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestChangesIgnoresWhatIsNotAChangeOfTheUser: a JetStream acknowledgement
// that a frontend's turn named as its reply, or another user's change,
// reaches fn as an error with a zero Change, never as a change whose seq a
// subscriber would take; a change of the user after them comes through.
func TestChangesIgnoresWhatIsNotAChangeOfTheUser(t *testing.T) {
	t.Parallel()
	nc := eventstest.Conn(t)
	prefix, _ := eventstest.Names(t, nc)
	type got struct {
		ch  events.Change
		err error
	}
	out := make(chan got, 8)
	sub, err := events.NewClient(nc, prefix).Changes("alice", func(ch events.Change, err error) { out <- got{ch, err} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	subject := events.ChangesSubject(prefix, "alice")
	for _, body := range []string{
		`{"stream":"MEMORY_TURNS","seq":977}`,
		`{"user_id":"bob","seq":3,"type":"fact.set","at":"2026-11-21T10:00:03Z","key":"city","value":"Rome"}`,
		`{"user_id":"alice","seq":4,"at":"2026-11-21T10:00:03Z"}`,
		`{"user_id":"alice","seq":5,"type":"fact.set","at":"2026-11-21T10:00:03Z","key":"city","value":"Rome"}`,
	} {
		if err := nc.Publish(subject, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		select {
		case g := <-out:
			if i < 3 && (g.err == nil || g.ch != (events.Change{})) {
				t.Errorf("message %d: %+v, %v; want an error and a zero change", i, g.ch, g.err)
			}
			if i == 3 && (g.err != nil || g.ch.Seq != 5 || g.ch.Value != "Rome") {
				t.Errorf("alice's change: %+v, %v", g.ch, g.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 4 messages delivered", i)
		}
	}
}
