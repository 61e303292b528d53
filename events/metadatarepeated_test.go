package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestDecodeRefusesMetadataKeyGivenTwice: a key given twice anywhere in a
// turn's metadata is refused, naming its path, as a turn's own field given
// twice is; before, the jsonb kept the last value silently (other parsers
// keep the first). Keys differing in case are two keys.
func TestDecodeRefusesMetadataKeyGivenTwice(t *testing.T) {
	const turn = `{"id":"e1","user_id":"alice","user_message":"hi","timestamp":"2026-11-21T10:00:00Z","metadata":%s}`
	for meta, want := range map[string]string{
		`{"a":1,"a":2}`:                         `metadata: key "a" is given twice`,
		`{"app":{"v":"1","v":"2"}}`:             `metadata: key "app.v" is given twice`,
		`{"tags":[{"id":1},{"id":2,"id":3}]}`:   `metadata: key "tags[1].id" is given twice`,
		`{"x":{"k":1,"\u006b":2}}`:              `metadata: key "x.k" is given twice`,
		`{"a":{"b":1},"c":{"b":2},"A":1,"B":2}`: "",
	} {
		_, err := events.Decode([]byte(strings.Replace(turn, "%s", meta, 1)))
		switch {
		case want == "" && err != nil:
			t.Errorf("metadata %s: %v, want it taken", meta, err)
		case want != "" && (!errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), want)):
			t.Errorf("metadata %s: %v, want %q", meta, err, want)
		}
	}
}

// TestDecodeRefusesANumberForAString: a bare number where the protocol's
// table and turn_event.json say string (an id, a user id, a text) is
// invalid, naming the field, never converted: a frontend sending a numeric
// user id learns it at once, rather than meeting another user's "42".
func TestDecodeRefusesANumberForAString(t *testing.T) {
	base := map[string]string{"id": `"e1"`, "user_id": `"alice"`, "user_message": `"hi"`, "timestamp": `"2026-11-21T10:00:00Z"`}
	for _, field := range []string{"id", "user_id", "conversation_id", "user_message", "assistant_response", "scope"} {
		var b strings.Builder
		b.WriteString("{")
		for k, v := range base {
			if k != field {
				b.WriteString(`"` + k + `":` + v + ",")
			}
		}
		b.WriteString(`"` + field + `":42}`)
		_, err := events.Decode([]byte(b.String()))
		if want := field + ": must be string, not number"; !errors.Is(err, events.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", b.String(), err, want)
		}
	}
}
