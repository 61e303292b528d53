package worker_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor"
)

// TestInvalidOptedOutEventKeepsNoText: an event sent with memory off that
// breaks another rule is opted out all the same: its dead letter holds its
// ids, reason and sizes but not its text, and the event is erased from the
// turn stream, as a valid opted-out one is. An invalid event with memory
// on is still copied whole, and stays in the stream.
func TestInvalidOptedOutEventKeepsNoText(t *testing.T) {
	e := setup(t)
	e.start(extractor.NewRules(), nil)
	subj := events.TurnSubject(e.prefix, "alice")
	const secret = "my password is hunter2"
	opted := map[string]string{
		"no timestamp":         `{"id":"o1","user_id":"alice","user_message":"` + secret + `","memory":false}`,
		"long conversation id": `{"id":"o2","user_id":"alice","conversation_id":"` + strings.Repeat("c", 300) + `","user_message":"` + secret + `","timestamp":"2026-11-21T10:00:00Z","memory":false}`,
		"long message":         `{"id":"o3","user_id":"alice","user_message":"` + secret + strings.Repeat(" x", 35<<10) + `","timestamp":"2026-11-21T10:00:00Z","memory":false}`,
		"token mismatch":       `{"id":"o4","user_id":"bob","user_message":"` + secret + `","assistant_response":"` + secret + `","timestamp":"2026-11-21T10:00:00Z","memory":false}`,
		// Memory off in a form memoryd cannot read as a boolean: the
		// safe reading.
		"memory a string": `{"id":"o5","user_id":"alice","user_message":"` + secret + `","timestamp":"2026-11-21T10:00:00Z","memory":"false","metadata":{"note":"` + secret + `"}}`,
		// Field names are read case-insensitively, as Decode reads them.
		"Memory capitalised": `{"id":"o6","user_id":"alice","User_Message":"` + secret + `","timestamp":"2026-11-21T10:00:00+24:00","Memory":false}`,
		// A metadata number's reason would quote it.
		"metadata number": `{"id":"o7","user_id":"alice","user_message":"` + secret + `","timestamp":"2026-11-21T10:00:00Z","memory":false,"metadata":{"pin":2222e99999}}`,
	}
	const kept = `{"id":"k1","user_id":"alice","user_message":"` + secret + `"}` // memory on: copied whole
	seqOf := map[string]uint64{}
	for name, body := range opted {
		ack, err := e.js.Publish(e.ctx, subj, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		seqOf[name] = ack.Sequence
	}
	keptAck, err := e.js.Publish(e.ctx, subj, []byte(kept))
	if err != nil {
		t.Fatal(err)
	}
	e.rejectAll(subj)
	letters, err := events.ReadDeadLetters(e.ctx, e.js, e.prefix, e.stream, "", 100, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != len(opted)+1 {
		t.Fatalf("%d dead letters, want %d", len(letters), len(opted)+1)
	}
	bySeq := map[string]events.DeadLetter{}
	for _, d := range letters {
		bySeq[d.StreamSeq] = d
	}
	for name, seq := range seqOf {
		d, ok := bySeq[strconv.FormatUint(seq, 10)]
		if !ok {
			t.Errorf("%s: no dead letter", name)
			continue
		}
		if strings.Contains(string(d.Data), "hunter2") || strings.Contains(d.Reason, "2222") || !d.OptedOut || d.Reason == "" || d.UserToken == "" {
			t.Errorf("%s: dead letter reason %q, opted out %v, user token %q, data %.200s; want one without the text, opted out, with reason and user token",
				name, d.Reason, d.OptedOut, d.UserToken, d.Data)
		}
		var copied struct {
			ID     string         `json:"id"`
			UserID string         `json:"user_id"`
			Memory *bool          `json:"memory"`
			Sizes  map[string]int `json:"sizes"`
		}
		if err := json.Unmarshal(d.Data, &copied); err != nil || copied.ID == "" || copied.UserID == "" || copied.Memory == nil || *copied.Memory ||
			copied.Sizes["user_message"] == 0 || copied.Sizes["event"] != len(opted[name]) {
			t.Errorf("%s: copy %.200s (%v); want the ids, memory false and the sizes", name, d.Data, err)
		}
	}
	if d := bySeq[strconv.FormatUint(keptAck.Sequence, 10)]; d.OptedOut || string(d.Data) != kept {
		t.Errorf("invalid event with memory on: dead letter opted out %v, data %.200s; want it whole", d.OptedOut, d.Data)
	}
	// The turn stream keeps no text of them: erased before the ack.
	stream, err := e.js.Stream(e.ctx, e.stream)
	if err != nil {
		t.Fatal(err)
	}
	for name, seq := range seqOf {
		if _, err := stream.GetMsg(e.ctx, seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
			t.Errorf("%s: event %d still in the turn stream (err %v)", name, seq, err)
		}
	}
	if _, err := stream.GetMsg(e.ctx, keptAck.Sequence); err != nil {
		t.Errorf("invalid event with memory on: %v; want it left in the stream", err)
	}
}
