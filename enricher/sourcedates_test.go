package enricher_test

import (
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestSourceDatesAreDaysOfAtsOffset: a source's date is the day of at's UTC
// offset, as the message's time expressions are read ("yesterday" of a
// request at 08:00 +09:00 is the user's yesterday), UTC without at. Before,
// always the UTC day: a turn said at 08:30 in Tokyo on Nov 21 read
// "2026-11-20" in the very reply whose "yesterday" meant Nov 20 in Tokyo.
func TestSourceDatesAreDaysOfAtsOffset(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	said := time.Date(2026, 11, 20, 23, 30, 0, 0, time.UTC) // 08:30 on Nov 21 in Tokyo, 18:30 on Nov 20 in New York
	upsertFacts(t, st, store.FactWrite{UserID: "u", Key: "dog", Value: "Rex", SourceAt: said, EventID: "e1"})
	insertContext(t, st, store.ContextWrite{UserID: "u", Question: "What is my dog called?", Answer: "Rex", EventID: "e1", CreatedAt: said})
	for _, tt := range []struct {
		at   string
		want string
	}{
		{"", "2026-11-20"},
		{"2026-11-22T10:00:00Z", "2026-11-20"},
		{"2026-11-22T10:00:00+09:00", "2026-11-21"},
		{"2026-11-22T10:00:00-05:00", "2026-11-20"},
		{"2026-11-22T10:00:00+00:30", "2026-11-21"},
		{"2026-11-22T10:00:00+00:29", "2026-11-20"},
	} {
		req := events.EnrichRequest{UserID: "u", Message: "what is my dog called?", Format: events.FormatSystem, Facts: "all"}
		if tt.at != "" {
			at, err := time.Parse(time.RFC3339, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			req.At = at
		}
		r := enrich(t, h, req)
		if len(r.Facts) != 1 || len(r.Context) != 1 {
			t.Fatalf("at %q: %d facts, %d items; want the dog's", tt.at, len(r.Facts), len(r.Context))
		}
		if n := strings.Count(r.Injection, "turn e1, "+tt.want); n != 2 {
			t.Errorf("at %q: the fact's and the item's sources read %d times %q, want 2:\n%s", tt.at, n, "turn e1, "+tt.want, r.Injection)
		}
	}
}
