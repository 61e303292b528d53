package extractor

import (
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestStripMarkersKeepsAUsersNumberedLinesAfterFacts: a user's numbered
// line on the line after an echoed injection's facts or memories, then
// lines through one of a document chunk's last shape (a quotation cited
// as the formats cite), is the user's: a chunk is only in the injection's
// documents section. Since d25e1bb2 (a chunk's lines read whatever their
// indentation) the user's lines went with the injection, and the turn
// kept nothing of them.
func TestStripMarkersKeepsAUsersNumberedLinesAfterFacts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ inj, msg string }{
		{events.SystemPreamble + "\n\nFacts about the user:\n1. city\\: Paris (source: turn e1)",
			"1. To be or not to be\nthat is the question\n(source: [1] Hamlet)"},
		{events.MarkdownHeading + "\n\n### Facts\n- **city**: Paris _(source: turn e1)_",
			"1. To be or not to be\nthat is the question\n[1] _Relevance 0.50_"},
	} {
		if got := StripMarkers(tc.inj + "\n" + tc.msg); got != tc.msg {
			t.Errorf("StripMarkers(%q)\n = %q\nwant %q", tc.inj+"\n"+tc.msg, got, tc.msg)
		}
	}
}
