package main

import (
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// publish from stdin refuses an event that is not a JSON object (null, an
// array, a string, a number) with memoryd's reason, naming the event, the
// turns before it published; before, a null crashed the command (a
// panic: assignment to entry in nil map).
func TestPublishFromStdinRefusesNonObject(t *testing.T) {
	t.Parallel()
	for _, ev := range []string{`null`, `[]`, `"hi"`, `12`} {
		var sent []string
		err := publishStream(strings.NewReader(`{"id":"a","user_id":"alice","user_message":"hi"}
`+ev+`
{"id":"c","user_id":"alice","user_message":"hi"}`), func(turn events.Turn) error {
			sent = append(sent, turn.ID)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "stdin turn 2: invalid turn event") || len(sent) != 1 {
			t.Errorf("event %s: %v, sent %v; want stdin turn 2 refused as an invalid turn event, a alone sent", ev, err, sent)
		}
	}
}
