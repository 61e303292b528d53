package main

import (
	"bytes"
	"testing"

	"github.com/memoryd/memoryd/events"
)

// TestPrintEnrich: the injection goes to stdout; a degraded reply says why
// and nothing more (it printed "no memory for this message" after the
// reason during an outage, as if the memory were empty).
func TestPrintEnrich(t *testing.T) {
	for _, tt := range []struct {
		name           string
		reply          events.EnrichReply
		stdout, stderr string
	}{
		{"memory", events.EnrichReply{Injection: "[facts: location=Lisbon]"}, "[facts: location=Lisbon]\n", ""},
		{"none", events.EnrichReply{Keywords: []string{"live"}}, "", "memoryd enrich: no memory for this message (keywords: live)\n"},
		{"degraded", events.EnrichReply{Degraded: true, Reason: "memory store unavailable", Keywords: []string{"live"}}, "",
			"memoryd enrich: degraded reply: memory store unavailable\n"},
		{"degraded with memory", events.EnrichReply{Degraded: true, Reason: "document search unavailable; facts and memories only", Injection: "[facts: name=Ana]"},
			"[facts: name=Ana]\n", "memoryd enrich: degraded reply: document search unavailable; facts and memories only\n"},
	} {
		var out, errOut bytes.Buffer
		printEnrich(&out, &errOut, tt.reply)
		if out.String() != tt.stdout || errOut.String() != tt.stderr {
			t.Errorf("%s: stdout %q, stderr %q; want %q, %q", tt.name, out.String(), errOut.String(), tt.stdout, tt.stderr)
		}
	}
}
