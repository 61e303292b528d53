package events

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestFrontendInbox(t *testing.T) {
	for _, tc := range []struct {
		frontend, want string
	}{
		{"alice_frontend", "_INBOX_alice_frontend"},
		{"web-1", "_INBOX_web-1"},
		{strings.Repeat("x", 64), "_INBOX_" + strings.Repeat("x", 64)},
		{"", ""},
		{"a.b", ""},
		{"*", ""},
		{">", ""},
		{"a b", ""},
		{strings.Repeat("x", 65), ""},
	} {
		var o nats.Options
		err := FrontendInbox(tc.frontend)(&o)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("FrontendInbox(%q) accepted, prefix %q", tc.frontend, o.InboxPrefix)
		case tc.want != "" && (err != nil || o.InboxPrefix != tc.want):
			t.Errorf("FrontendInbox(%q) = %q, %v; want %q", tc.frontend, o.InboxPrefix, err, tc.want)
		case tc.want != "" && o.AsyncErrorCB == nil:
			t.Errorf("FrontendInbox(%q) keeps no violations (TrackViolations)", tc.frontend)
		}
	}
}
