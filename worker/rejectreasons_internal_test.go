package worker

import (
	"slices"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// Every reason an invalid event is counted under is one RejectReasons
// lists, so that memoryd_turns_rejected_total shows it at 0 before the
// first such event (an alert on its increase misses the event that
// creates the series). Before, the invalid_<field> reasons were left out.
func TestRejectReasonsListEveryReasonOfAnInvalidEvent(t *testing.T) {
	known := RejectReasons()
	payloads := []string{
		`not json`,
		`{"id":"e1","user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"yesterday"}`,
		`{"id":"e1","user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r"}`,
		`{"id":1,"user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"2026-12-01T10:00:00Z"}`,
		`{"id":"e1","user_id":"","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"2026-12-01T10:00:00Z"}`,
		`{"id":"e1","user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"2026-12-01T10:00:00Z","memory":"yes"}`,
		`{"id":"e1","user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"2026-12-01T10:00:00Z","metadata":[1]}`,
	}
	for _, f := range events.TurnFields() {
		// Each field with a value of a type none of them has.
		payloads = append(payloads, `{"id":"e1","user_id":"u","conversation_id":"c","user_message":"m","assistant_response":"r","timestamp":"2026-12-01T10:00:00Z","`+f+`":{"x":[true]}}`)
	}
	seen := map[string]bool{}
	for _, p := range payloads {
		turn, err := events.Decode([]byte(p))
		if err == nil {
			err = turn.Validate()
		}
		if err == nil {
			continue
		}
		r := rejectReason(err)
		seen[r] = true
		if !slices.Contains(known, r) {
			t.Errorf("%s: rejected as %q (%v), which RejectReasons does not list: %v", p, r, err, known)
		}
	}
	if !seen["invalid_timestamp"] || !seen["invalid_id"] {
		t.Fatalf("the payloads did not reach the field reasons: %v", seen)
	}
}
