package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/memoryd/memoryd/events"
)

func runDeadLetters(ctx context.Context, a *cli, args []string) error {
	var (
		o        connOptions
		user     string
		limit    int
		withJSON bool
	)
	f := newFlags("deadletters", `Usage: memoryd deadletters [--user U] [--limit N] [--json]

Lists the last turn events memoryd rejected (the dead-letter stream,
<stream>_DEADLETTER), oldest first: sequence, time, reason, the subject the
event came on and the user token it names. Without --user every user's;
with it, those attributed to that user. --json prints one JSON object per
letter with the event itself, which holds the user's text (for an event
sent with "memory": false, "opted_out": true and only its ids and sizes).`)
	o.register(f)
	f.ArgString(&user, "user", "", "only this user's dead letters")
	f.ArgInt(&limit, "limit", 20, "most dead letters, the last ones")
	f.ArgBool(&withJSON, "json", false, "print JSON lines, each with the rejected event")
	if err := f.Parse(args); err != nil {
		return err
	}
	if limit < 1 {
		return f.usageErr("--limit %d is not a positive number", limit)
	}
	// --user "" (a script's unset variable) listed every user's, and
	// --user "  " none: refused, as every other command refuses a blank
	// user id.
	given := false
	f.Visit(func(fl *flag.Flag) { given = given || fl.Name == "user" })
	if given && strings.TrimSpace(user) == "" {
		return f.usageErr("--user is blank: give a user id, or leave --user out for every user's dead letters")
	}
	js, ctx, closeNATS, err := o.jetStream(ctx, a, "memoryd-deadletters")
	if err != nil {
		return err
	}
	defer closeNATS()
	letters, err := events.ReadDeadLetters(ctx, js, o.prefix, o.stream, user, limit, withJSON)
	if errors.Is(err, events.ErrNoDeadLetters) {
		fmt.Fprintf(a.stdout, "0 dead letter(s): no stream %s (memoryd creates it when it starts ingesting)\n", events.DeadLetterStream(o.stream))
		return nil
	}
	if err != nil {
		if perr := refusedByServer(js.Conn()); perr != nil {
			// A refused JetStream API request is dropped, not answered:
			// without this it reads as a timeout.
			return perr
		}
		return err
	}
	for _, d := range letters {
		if withJSON {
			line := map[string]any{"seq": d.Seq, "time": d.Time.UTC().Format(time.RFC3339Nano), "subject": d.Subject,
				"reason": d.Reason, "original_subject": d.OriginalSubject, "stream_seq": d.StreamSeq, "user_token": d.UserToken}
			// A number, as seq is (the header is text); null for a
			// letter without memoryd's header.
			line["stream_seq"] = nil
			if n, err := strconv.ParseUint(d.StreamSeq, 10, 64); err == nil {
				line["stream_seq"] = n
			}
			if d.OptedOut {
				line["opted_out"] = true
			}
			if json.Valid(d.Data) {
				line["event"] = json.RawMessage(d.Data)
			} else {
				line["event_text"] = string(d.Data)
			}
			b, err := json.Marshal(line)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, string(b))
			continue
		}
		fmt.Fprintf(a.stdout, "%d\t%s\treason=%q\tsubject=%s\tuser_token=%s\n",
			d.Seq, shownTime(d.Time), d.Reason, d.OriginalSubject, d.UserToken)
	}
	if !withJSON {
		fmt.Fprintf(a.stdout, "%d dead letter(s)\n", len(letters))
	}
	return nil
}
