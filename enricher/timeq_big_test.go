package enricher_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEnrichTimeOnlyPrefersWhatFits: a question about a time alone picks,
// near each run's middle, the item with the most words; a pasted log or
// code file has the most, and is then dropped by the token budget with
// nothing in its place (a time question gets no reserves), so a day with
// a paste in each run gave no item at all, where its topics fit.
func TestEnrichTimeOnlyPrefersWhatFits(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	day := time.Date(2026, 11, 17, 8, 0, 0, 0, time.UTC) // yesterday at timeAt
	var ws []store.ContextWrite
	for i := range 12 {
		q, a := "Can you help with topic "+strconv.Itoa(i)+" and the garden fence?", "Sure: here is what I would check first, then the options."
		if i%4 == 1 {
			var b strings.Builder
			for j := range 1500 {
				fmt.Fprintf(&b, "line%d_%d ", i, j)
			}
			q, a = "Here is my log, what is wrong?", b.String()
		}
		ws = append(ws, store.ContextWrite{UserID: "carla", Question: q, Answer: a, CreatedAt: day.Add(time.Duration(i) * time.Hour), EventID: "t" + strconv.Itoa(i)})
	}
	insertContext(t, st, ws...)
	r := enrich(t, h, events.EnrichRequest{UserID: "carla", Message: "what did we talk about yesterday?", At: timeAt})
	if len(r.Context) == 0 {
		t.Errorf("no item of a day of twelve turns (%d tokens): the picks were the pastes, too large for the budget", r.Tokens)
	}
}
