package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/memoryd/memoryd/events"
)

func runPublish(ctx context.Context, a *cli, args []string) (err error) {
	var (
		o                                     connOptions
		user, conv, message, response, id, at string
		noMemory, ensure                      bool
		wait                                  time.Duration
	)
	f := newFlags("publish", `Usage: memoryd publish [flags]
       memoryd publish < turns.jsonl

Publishes one turn from flags, or, without --message, turn events as JSON
objects (one after another, e.g. JSON lines) from standard input (an event
without "id" or "timestamp" gets a random id and the current time). Prints one
line per turn: the event id, the stream sequence, and "duplicate" when
JetStream had it already. Standard input is read and published one event at
a time: an invalid event stops it there (exit 1, naming the event), after
the ones before it were published; fix it and run again from it, or all
again (a re-publish of the same event id is a duplicate).`)
	o.register(f)
	f.Lookup("database-url").Usage = "not used: this command talks to NATS only"
	f.ArgString(&user, "user", "", "user id (with --message)")
	f.ArgString(&conv, "conversation", "", "conversation id")
	f.ArgString(&message, "message", "", "the user's message; without it, turns are read from stdin")
	f.ArgString(&response, "response", "", "the assistant's reply")
	f.ArgString(&id, "id", "", "event id (default: random)")
	f.ArgString(&at, "timestamp", "", "turn time, RFC 3339 (default: now)")
	f.ArgBool(&noMemory, "no-memory", false, `publish with "memory": false (the user opted out)`)
	f.ArgDuration(&wait, "wait", 0, "then wait up to this long until memoryd has processed the turns (as docs/protocol.md tells a frontend: its stats), so that enrich finds them; 0: do not wait")
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
	// The turn of the flags is checked before anything is set up: the
	// flags' values are what is wrong (exit 2), and no stream is created.
	var one *events.Turn
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
		if err := t.Validate(); err != nil {
			return f.usageErr("%v", err)
		}
		one = &t
	}
	js, ctx, closeNATS, err := o.jetStream(ctx, a, "memoryd-publish")
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
	var w *processedWaiter
	if wait > 0 {
		w = &processedWaiter{c: events.NewClient(js.Conn(), o.prefix), nc: js.Conn(), seen: map[string]events.StatsReply{}, sent: map[string]int64{}}
	}
	send := func(t events.Turn) error {
		if w != nil {
			if err := w.before(ctx, t.UserID); err != nil {
				// Said, so that no one publishes it again under another
				// random id when it was not sent.
				return fmt.Errorf("turn %s of user %s not published: %w", t.ID, t.UserID, err)
			}
		}
		ack, err := pub.Publish(ctx, t)
		if perr := refusedByServer(js.Conn()); err != nil && perr != nil {
			// The turn may be stored (its acknowledgement's inbox was
			// refused): sent again under the same id, it is dropped as a
			// duplicate rather than stored twice. A refused subject stored
			// nothing, and the same credential refuses it again.
			var r *refusal
			if errors.As(perr, &r) && r.sent {
				return fmt.Errorf("turn %s of user %s: %w (send it again with --id %s)", t.ID, t.UserID, perr, t.ID)
			}
			return fmt.Errorf("turn %s of user %s: %w", t.ID, t.UserID, perr)
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// JetStream would only say "no response from stream".
			return fmt.Errorf("no stream stores %s: start memoryd serve with this --prefix, or publish with --ensure-stream", events.TurnSubjects(o.prefix))
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// No acknowledgement is not "not stored": the stream may have
			// it. The same id again is dropped as a duplicate (within the
			// stream's duplicate window); a new id would store it twice.
			again := "--id " + t.ID
			if one == nil {
				again = fmt.Sprintf(`"id": %q`, t.ID)
			}
			return fmt.Errorf("turn %s of user %s: no acknowledgement from the stream in time: it may be stored; publish it again with %s, which the stream drops as a duplicate if it has it: %w", t.ID, t.UserID, again, err)
		}
		if err != nil {
			return err
		}
		dup := ""
		if ack.Duplicate {
			dup = " duplicate"
		}
		fmt.Fprintf(a.stdout, "%s seq=%d%s\n", t.ID, ack.Sequence, dup)
		if w != nil && !ack.Duplicate && t.MemoryEnabled() {
			w.sent[t.UserID]++
		}
		return nil
	}
	if w != nil {
		defer func() {
			if err == nil {
				err = w.wait(ctx, a, wait)
			}
		}()
	}

	if one != nil {
		return send(*one)
	}
	return publishStream(a.in(), send)
}

// publishStream publishes each JSON turn read from r; a turn without an id or
// timestamp gets a random id and the current time.
func publishStream(r io.Reader, send func(events.Turn) error) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			if n == 1 {
				return errors.New("no turns on stdin (give --message, or pipe JSON turns in)")
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
		// Checked before decoding, which would replace each bad byte with
		// U+FFFD and publish text that was not sent.
		if !utf8.Valid(raw) {
			return fmt.Errorf("stdin turn %d: not valid UTF-8", n)
		}
		// Checked before decoding too, which would keep the last of
		// "Memory" and "memory" and publish one of two readings: memoryd
		// refuses such an event, and so does the command.
		if name, first, second := events.RepeatedKey(raw, events.TurnFields()); name != "" {
			return fmt.Errorf("stdin turn %d: %w", n, &events.ValidationError{Field: name,
				Reason: events.GivenTwice(first, second)})
		}
		raw, err = fillIDAndTime(raw)
		if err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
		// memoryd's own decoder: the event is refused here for what memoryd
		// would dead-letter it for, with its reason (a zero timestamp is
		// year 1, not absent; a lowercase "z" is no RFC 3339 of memoryd's).
		t, err := events.Decode(raw)
		if err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
		if err := send(t); err != nil {
			return fmt.Errorf("stdin turn %d: %w", n, err)
		}
	}
}

// fillIDAndTime gives the event in raw a random id when its "id" is
// absent, null or empty, and the current time when its "timestamp" is
// absent or null (keys matched in any case, as the decoder does: raw names
// no field twice); other values are kept as sent, for Decode to judge.
func fillIDAndTime(raw json.RawMessage) (json.RawMessage, error) {
	if b := bytes.TrimLeft(raw, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		// Not an object (null, an array, a string): nothing to fill, and
		// Decode refuses it with memoryd's reason. Before, a null was
		// decoded into a nil map, and filling it crashed the command.
		return raw, nil
	}
	var probe struct {
		ID        json.RawMessage `json:"id"`
		Timestamp json.RawMessage `json:"timestamp"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, err
	}
	absent := func(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }
	fillID := absent(probe.ID) || string(probe.ID) == `""`
	fillTime := absent(probe.Timestamp)
	if !fillID && !fillTime {
		return raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	set := func(field string, v any) {
		for k := range m {
			if strings.EqualFold(k, field) {
				delete(m, k)
			}
		}
		m[field], _ = json.Marshal(v)
	}
	if fillID {
		set("id", newEventID())
	}
	if fillTime {
		set("timestamp", time.Now().UTC())
	}
	return json.Marshal(m)
}

func newEventID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "evt-" + hex.EncodeToString(b[:])
}

// processedWaiter waits, as docs/protocol.md tells a frontend that must
// know, until memoryd has processed the turns published: each user's
// turns_received grown by the turns published for them (duplicates and
// opted-out turns are never counted), then their turns_pending 0.
type processedWaiter struct {
	c    *events.Client
	nc   *nats.Conn                   // c's, for the server's refusals
	seen map[string]events.StatsReply // each user's stats before their first turn
	sent map[string]int64
}

// before reads user's stats the first time a turn of theirs is published.
func (w *processedWaiter) before(ctx context.Context, user string) error {
	if _, ok := w.seen[user]; ok || user == "" {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := w.c.Stats(sctx, user)
	if refused := refusedByServer(w.nc); err != nil && refused != nil {
		// The credential's, not a missing serve: said as stats says it.
		return fmt.Errorf("--wait reads the user's stats: %w", refused)
	}
	if err != nil {
		return fmt.Errorf("--wait reads the user's stats from a running memoryd serve (not --role ingest): start one, or publish without --wait: %w", err)
	}
	w.seen[user] = st
	return nil
}

// wait polls the users' stats until their turns are processed, at most
// limit; it reports on stderr, and fails when the limit passes.
func (w *processedWaiter) wait(ctx context.Context, a *cli, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var turns, failed int64
	for user, n := range w.sent {
		recorded := false // the turns are in memoryd's stats, pending or not
		var pending int64
		for {
			st, err := w.c.Stats(ctx, user)
			if err == nil {
				recorded, pending = st.TurnsReceived >= w.seen[user].TurnsReceived+n, st.TurnsPending
			}
			if err == nil && recorded && st.TurnsPending == 0 {
				turns += n
				failed += st.TurnsFailed - w.seen[user].TurnsFailed
				break
			}
			if ctx.Err() == nil && err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("--wait: stats: %w", err)
			}
			select {
			case <-ctx.Done():
				if recorded {
					// Not lost: the causes below would mislead (a walk
					// with the model server rate limiting).
					return fmt.Errorf("--wait: memoryd recorded %s's %d new turn(s), but %d of the user's turns were still waiting for extraction after %s: "+
						"extraction is slow or waiting for the model server (memoryd's log says which); they will be processed, so a longer --wait sees them", user, n, pending, limit)
				}
				return fmt.Errorf("--wait: memoryd had not recorded and processed %s's %d new turn(s) within %s: it is not running with this --prefix and --stream, "+
					"it rejected them (memoryd deadletters lists them), or it had recorded their event ids already (a re-publish after the stream's 2-minute duplicate window)", user, n, limit)
			case <-tick.C:
			}
		}
	}
	if failed > 0 {
		fmt.Fprintf(a.stderr, "settled: %d turn(s) of %d user(s), %d of them failed extraction\n", turns, len(w.sent), failed)
		return fmt.Errorf("%d turn(s) failed extraction: memoryd failed lists them", failed)
	}
	fmt.Fprintf(a.stderr, "processed: %d turn(s) of %d user(s)\n", turns, len(w.sent))
	return nil
}
