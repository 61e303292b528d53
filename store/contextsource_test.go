package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// A pair said in several turns is one item whose time and source are one
// turn's, the newest (of equal times, the greatest event id), whatever the
// order the turns were extracted in: a replay beside live ingest extracts in
// another order than a quiet one, and gave the same item another event id,
// with its time from a different turn.
func TestRepeatedPairTakesTheNewestTurnWhateverTheOrder(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	turn := func(user, event, conv string, at time.Time) store.ContextWrite {
		return store.ContextWrite{UserID: user, Question: "what do I drink?", Answer: "green tea", CreatedAt: at, EventID: event, ConversationID: conv}
	}
	for _, tt := range []struct {
		name             string
		first, second    store.ContextWrite
		wantEvent, wantC string
		wantAt           time.Time
	}{
		{"newer second", turn("u1", "e1", "c1", t1), turn("u1", "e2", "c2", t2), "e2", "c2", t2},
		{"newer first", turn("u1", "e2", "c2", t2), turn("u1", "e1", "c1", t1), "e2", "c2", t2},
		{"same time, lower id second", turn("u1", "e9", "c9", t1), turn("u1", "e1", "c1", t1), "e9", "c9", t1},
		{"same time, lower id first", turn("u1", "e1", "c1", t1), turn("u1", "e9", "c9", t1), "e9", "c9", t1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, s := setup(t)
			for _, w := range []store.ContextWrite{tt.first, tt.second} {
				if _, err := s.InsertContext(ctx, []store.ContextWrite{w}); err != nil {
					t.Fatal(err)
				}
			}
			items, err := s.ListContext(ctx, "u1", store.ContextCursor{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(items) != 1 || items[0].EventID != tt.wantEvent || items[0].ConversationID != tt.wantC || !items[0].CreatedAt.Equal(tt.wantAt) {
				t.Fatalf("items %+v; want one from %s (%s) at %s", items, tt.wantEvent, tt.wantC, tt.wantAt)
			}
		})
	}
}
