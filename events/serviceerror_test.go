package events_test

import (
	"testing"

	"github.com/memoryd/memoryd/events"
)

// Which service errors a frontend sends again: only the 500s, the
// overloaded refusal among them; every other code asks for a change first.
func TestServiceErrorTemporary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err                   events.ServiceError
		temporary, overloaded bool
	}{
		{events.ServiceError{Code: 500, Description: events.OverloadedDescription}, true, true},
		{events.ServiceError{Code: 500, Description: "memoryd stopped before this request was done: send it again"}, true, false},
		{events.ServiceError{Code: 400, Description: "user_id is required"}, false, false},
		{events.ServiceError{Code: 404, Description: "no such item"}, false, false},
		{events.ServiceError{Code: 409, Description: "export cursor expired"}, false, false},
		{events.ServiceError{Code: 413, Description: "reply too large"}, false, false},
		{events.ServiceError{Code: 501, Description: "not enabled"}, false, false},
		{events.ServiceError{Code: 507, Description: "documents cap"}, false, false},
	} {
		if got := tc.err.Temporary(); got != tc.temporary {
			t.Errorf("%v: Temporary() = %v, want %v", &tc.err, got, tc.temporary)
		}
		if got := tc.err.Overloaded(); got != tc.overloaded {
			t.Errorf("%v: Overloaded() = %v, want %v", &tc.err, got, tc.overloaded)
		}
	}
}
