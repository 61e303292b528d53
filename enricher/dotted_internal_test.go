package enricher

import (
	"strings"
	"testing"
)

// TestDottedNumberCostsItsLength: a message of one long run of numbers
// joined by dots ("1.1.1....", 64 KiB) is read in time linear in its
// length. Every enrich request's keywords are taken on the endpoint's
// delivery goroutine, before the per-user limits, so one frontend's
// request held every user's enrich behind it: each part appended to the
// number rescanned and copied the number so far, 32,000 parts took 10 s
// (an enrich from another user waited 13 s). Counted in allocations, not
// time: the quadratic version allocates a new string per part.
func TestDottedNumberCostsItsLength(t *testing.T) {
	msg := strings.Repeat("1.", 4000) + "1"
	var got []string
	allocs := testing.AllocsPerRun(3, func() {
		got = got[:0]
		for w := range questionWords(msg) {
			got = append(got, w)
		}
	})
	if len(got) != 1 || got[0] != msg {
		t.Fatalf("words of a 4001-part dotted number: %d words, want the one number", len(got))
	}
	if allocs > 100 {
		t.Errorf("reading a 4001-part dotted number made %.0f allocations, want a handful (linear in the message)", allocs)
	}
	// The same holds where it ends a sentence and another follows.
	ws := []string{}
	for w := range questionWords("is it 0.51.0. and 10.0.0.1?") {
		ws = append(ws, w)
	}
	if strings.Join(ws, " ") != "is it 0.51.0 and 10.0.0.1" {
		t.Errorf("words = %q", ws)
	}
}
