package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

func runPublish(ctx context.Context, a *cli, args []string) error {
	var (
		o                                     connOptions
		user, conv, message, response, id, at string
		noMemory, ensure                      bool
	)
	f := newFlags("publish", `Usage: memoryd publish [flags]
       memoryd publish < turns.jsonl

Publishes one turn from flags, or, without --message, turn events as JSON
objects (one after another, e.g. JSON lines) from standard input. Prints one
line per turn: the event id, the stream sequence, and "duplicate" when
JetStream had it already. Standard input is read and published one event at
a time: an invalid event stops it there (exit 1, naming the event), after
the ones before it were published; fix it and run again from it, or all
again (a re-publish of the same event id is a duplicate).`)
	o.register(f)
	f.ArgString(&user, "user", "", "user id (with --message)")
	f.ArgString(&conv, "conversation", "", "conversation id")
	f.ArgString(&message, "message", "", "the user's message; without it, turns are read from stdin")
	f.ArgString(&response, "response", "", "the assistant's reply")
	f.ArgString(&id, "id", "", "event id (default: random)")
	f.ArgString(&at, "timestamp", "", "turn time, RFC 3339 (default: now)")
	f.ArgBool(&noMemory, "no-memory", false, `publish with "memory": false (the user opted out)`)
	f.Bool(&ensure, "ensure-stream", true, "create the turn stream first when it is missing, or add this prefix's subjects to it (its other settings are kept)")
	if err := f.Parse(args); err != nil {
		return err
	}
	if f.source["message"] == "flag" && strings.TrimSpace(message) == "" {
		// Given but empty (a shell variable that was not set): not a
		// request to read standard input.
		return f.usageErr("--message is empty: a turn needs the user's message (without --message, turns are read from standard input)")
	}
	if message != "" && user == "" {
		return f.usageErr("--user is required with --message")
	}
	if message == "" && user != "" {
		return f.usageErr("--user goes with --message; turns read from standard input carry their own user_id")
	}
	js, closeNATS, err := o.jetStream(a, "memoryd-publish")
	if err != nil {
		return err
	}
	defer closeNATS()
	if ensure {
		if _, err := events.EnsureStream(ctx, js, events.StreamConfig{Prefix: o.prefix, Stream: o.stream}); err != nil {
			if perr := refusedByServer(js.Conn()); perr != nil {
				return fmt.Errorf("ensure stream %s: %w (creating or checking the stream needs the JetStream API, $JS.API.>; with a frontend's credential, publish with --ensure-stream=false)", o.stream, perr)
			}
			return err
		}
	}
	// Without --ensure-stream nothing but the turn is published: a
	// frontend's credential may use no JetStream API subject.
	pub := events.NewPublisher(js, o.prefix)
	send := func(t events.Turn) error {
		ack, err := pub.Publish(ctx, t)
		if perr := refusedByServer(js.Conn()); err != nil && perr != nil {
			return perr
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// JetStream would only say "no response from stream".
			return fmt.Errorf("no stream stores %s: start memoryd serve with this --prefix, or publish with --ensure-stream", events.TurnSubjects(o.prefix))
		}
		if err != nil {
			return err
		}
		dup := ""
		if ack.Duplicate {
			dup = " duplicate"
		}
		fmt.Fprintf(a.stdout, "%s seq=%d%s\n", t.ID, ack.Sequence, dup)
		return nil
	}

	if message != "" {
		t := events.Turn{ID: id, UserID: user, ConversationID: conv, UserMessage: message, AssistantResponse: response}
		if t.ID == "" {
			t.ID = newEventID()
		}
		t.Timestamp = time.Now().UTC()
		if at != "" {
			if t.Timestamp, err = time.Parse(time.RFC3339Nano, at); err != nil {
				return f.usageErr("--timestamp %q is not RFC 3339", at)
			}
		}
		if noMemory {
			off := false
			t.Memory = &off
		}
		return send(t)
	}
	return publishStream(os.Stdin, send)
}

// publishStream publishes each JSON turn read from r; a turn without an id or
// timestamp gets a random id and the current time.
func publishStream(r io.Reader, send func(events.Turn) error) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	for n := 1; ; n++ {
		var t events.Turn
		err := dec.Decode(&t)
		if errors.Is(err, io.EOF) {
			if n == 1 {
				return errors.New("no turns on stdin (give --message, or pipe JSON turns in)")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
		if t.ID == "" {
			t.ID = newEventID()
		}
		if t.Timestamp.IsZero() {
			t.Timestamp = time.Now().UTC()
		}
		if err := send(t); err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
	}
}

func newEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "evt-" + hex.EncodeToString(b[:])
}
