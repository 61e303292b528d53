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
