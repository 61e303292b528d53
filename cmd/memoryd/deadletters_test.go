package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
)

// TestDeadLettersCommand: `memoryd deadletters` lists what the dead-letter
// stream holds (as memoryd writes it: the event, its reason and origin in
// headers), headers only unless --json, and says so when there is none.
func TestDeadLettersCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc := eventstest.Conn(t)
	prefix, stream := eventstest.Names(t, nc)
	run := func(args ...string) (string, string, int) {
		return runArgs(ctx, append([]string{"deadletters", "--nats-url", eventstest.URL(), "--prefix", prefix, "--stream", stream}, args...)...)
	}
	if out, errOut, code := run(); code != 0 || !strings.Contains(out, "0 dead letter(s): no stream") {
		t.Fatalf("before any: exit %d, %q %q", code, out, errOut)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: events.DeadLetterStream(stream), Subjects: []string{events.DeadLetterSubjects(prefix)}}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob"} {
		m := nats.NewMsg(events.DeadLetterSubject(prefix, user))
		m.Data = []byte(`{"id":"e1","user_id":"` + user + `","user_message":"my secret"}`)
		m.Header.Set(events.HeaderReason, "invalid turn event: timestamp: is required (RFC 3339)")
		m.Header.Set(events.HeaderOriginalSubject, events.TurnSubject(prefix, user))
		m.Header.Set(events.HeaderUserToken, user)
		m.Header.Set(events.HeaderStreamSeq, "41")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := run("--user", "bob")
	if code != 0 || !strings.Contains(out, `reason="invalid turn event: timestamp: is required (RFC 3339)"`) ||
		!strings.Contains(out, "1 dead letter(s)") || strings.Contains(out, "secret") {
		t.Fatalf("bob's: exit %d, %q %q", code, out, errOut)
	}
	// A time for people, as every command prints them (README): local,
	// naming its zone; it was RFC 3339 in UTC (a newcomer's walk).
	if !regexp.MustCompile(`\t\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+\treason=`).MatchString(out) {
		t.Errorf("bob's dead letter's time is not printed for people: %q", out)
	}
	out, errOut, code = run("--json", "--limit", "1")
	var line struct {
		Seq       uint64          `json:"seq"`
		StreamSeq any             `json:"stream_seq"` // a number, as seq (it was the header's text)
		Event     json.RawMessage `json:"event"`
	}
	if code != 0 || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &line) != nil || line.Seq != 2 || line.StreamSeq != float64(41) || !strings.Contains(string(line.Event), `"bob"`) {
		t.Fatalf("--json --limit 1: exit %d, %q %q", code, out, errOut)
	}
	// A letter without memoryd's header (another program's): null.
	m := nats.NewMsg(events.DeadLetterSubject(prefix, "carol"))
	m.Data = []byte(`{}`)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("--json", "--user", "carol")
	if code != 0 || !strings.Contains(out, `"stream_seq":null`) {
		t.Fatalf("--json of a letter without the stream position: exit %d, %q %q; want stream_seq null", code, out, errOut)
	}
}
