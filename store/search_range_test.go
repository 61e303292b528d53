package store_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestSearchRange: Since/Until narrow the candidates to [Since, Until) of
// created_at, either bound open when zero, and leave the statistics over
// all the user's items; Latest gives a keyword-less ranged query items
// spread over the range.
func TestSearchRange(t *testing.T) {
	ctx, s := setup(t)
	day := func(n int) time.Time { return t0.AddDate(0, 0, n) }
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "What did the dentist say?", Answer: "floss", CreatedAt: day(0), EventID: "e0"},
		store.ContextWrite{UserID: "alice", Question: "Dentist appointment again?", Answer: "next month", CreatedAt: day(7), EventID: "e7"},
		store.ContextWrite{UserID: "alice", Question: "Dentist bill", Answer: "paid", CreatedAt: day(14), EventID: "e14"},
		store.ContextWrite{UserID: "alice", Question: "Lunch", Answer: "soup", CreatedAt: day(7).Add(time.Hour), EventID: "l7"},
		store.ContextWrite{UserID: "bob", Question: "Dentist", Answer: "none", CreatedAt: day(7), EventID: "b7"},
	)
	matched := func(c store.Candidates) []string {
		var out []string
		for _, m := range c.Matches {
			out = append(out, m.Item.EventID)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name  string
		q     store.SearchQuery
		want  []string
		order bool // want is newest first, as read
	}{
		{"no range", store.SearchQuery{Keywords: []string{"dentist"}}, []string{"e0", "e14", "e7"}, false},
		{"one week", store.SearchQuery{Keywords: []string{"dentist"}, Since: day(7), Until: day(8)}, []string{"e7"}, false},
		{"until is excluded", store.SearchQuery{Keywords: []string{"dentist"}, Since: day(1), Until: day(7)}, nil, false},
		{"since is included", store.SearchQuery{Keywords: []string{"dentist"}, Since: day(14)}, []string{"e14"}, false},
		{"open since", store.SearchQuery{Keywords: []string{"dentist"}, Until: day(7).Add(time.Nanosecond * 1000)}, []string{"e0", "e7"}, false},
		// Bounds finer than Postgres's microseconds: before, pgx cut them
		// down, the first to e7's time (left out), the second too (let in).
		{"until a nanosecond after", store.SearchQuery{Keywords: []string{"dentist"}, Since: day(6), Until: day(7).Add(time.Nanosecond)}, []string{"e7"}, false},
		{"since a fraction after", store.SearchQuery{Keywords: []string{"dentist"}, Since: day(7).Add(400 * time.Nanosecond), Until: day(8)}, nil, false},
		{"no keyword, no latest", store.SearchQuery{Since: day(7), Until: day(8)}, nil, false},
		{"latest", store.SearchQuery{Since: day(7), Until: day(8), Latest: 5}, []string{"l7", "e7"}, true},
		// Four items, two wanted: of each half the one with the most
		// words ("Lunch"/"soup" has fewest), newest first; then the
		// halves' others, as reserves.
		{"latest spreads", store.SearchQuery{Since: day(0), Latest: 2}, []string{"e14", "e7", "l7", "e0"}, true},
		{"latest all", store.SearchQuery{Since: day(0), Latest: 4}, []string{"e14", "l7", "e7", "e0"}, true},
		{"latest ignored with keywords", store.SearchQuery{Keywords: []string{"soup"}, Since: day(0), Latest: 2}, []string{"l7"}, false},
		{"latest without range reads none", store.SearchQuery{Latest: 2}, nil, false},
		{"scoped ranged", store.SearchQuery{Keywords: []string{"dentist"}, Scope: "other", Since: day(7)}, nil, false},
		{"scoped latest", store.SearchQuery{Scope: "other", Since: day(7), Latest: 3}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.UserID = "alice"
			c, err := s.SearchContext(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			got := matched(c)
			if tt.order {
				got = nil
				for _, m := range c.Matches {
					got = append(got, m.Item.EventID)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("matches %v, want %v", got, tt.want)
			}
			if tt.q.Scope == "" && (tt.want != nil || tt.q.Keywords != nil) && c.Stats.Items != 4 {
				t.Errorf("statistics over %d items, want all 4 of the user's", c.Stats.Items)
			}
		})
	}
	// A ranged read gives each term's document frequency over all the
	// user's items, not the range's (a word looked rare in a narrow range,
	// and outranked the answer: a time walk); bob's items are not counted.
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"dentist", "soup", "zebra"}, Since: day(7), Until: day(8)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.DF, []int{3, 1, 0}) || len(c.Matches) != 2 {
		t.Errorf("ranged read: DF %v over terms %v, %d matches; want [3 1 0] over all alice's items, 2 matches in range", c.DF, c.Terms, len(c.Matches))
	}
	// Recall with a range: the facts are not filtered.
	if _, _, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "alice", Since: day(7), Until: day(8), Latest: 3}, MaxFacts: 5}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []store.SearchQuery{
		{UserID: "alice", Keywords: []string{"x"}, Since: day(2), Until: day(1)},
		{UserID: "alice", Keywords: []string{"x"}, Since: day(1), Until: day(1)},
		{UserID: "alice", Since: day(1), Latest: -1},
	} {
		if _, err := s.SearchContext(ctx, q); err == nil {
			t.Errorf("SearchContext(%+v) did not fail", q)
		}
	}
}

// TestSearchLatestSpreads: a question about a time alone gets items spread
// over its range, one of each of Latest equal runs, newest first, not the
// range's last turns: a day's newest turn is often its goodbye, and the
// five newest of a day of twelve say nothing of its morning. Of items of
// as many words, a run's middle one.
func TestSearchLatestSpreads(t *testing.T) {
	ctx, s := setup(t)
	var ws []store.ContextWrite
	for i := range 12 { // a day of twelve turns, one an hour, e0 first
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: "turn " + strconv.Itoa(i), Answer: "ok",
			CreatedAt: t0.Add(time.Duration(i) * time.Hour), EventID: "e" + strconv.Itoa(i)})
	}
	ws = append(ws, store.ContextWrite{UserID: "alice", Question: "the next day", Answer: "ok", CreatedAt: t0.AddDate(0, 0, 1), EventID: "next"},
		store.ContextWrite{UserID: "bob", Question: "bob's turn", Answer: "ok", CreatedAt: t0.Add(time.Hour), EventID: "bob"})
	seedContext(t, s, ws...)
	for _, tt := range []struct {
		latest int
		scope  string
		want   []string
	}{
		// Runs of 12/5 newest first: e11 e10 | e9 e8 | e7 e6 e5 | e4 e3 | e2 e1 e0.
		{5, "", []string{"e10", "e8", "e5", "e3", "e1"}},
		{1, "", []string{"e5"}},
		{2, "", []string{"e8", "e2"}},
		{12, "", []string{"e11", "e10", "e9", "e8", "e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"}},
		{20, "", []string{"e11", "e10", "e9", "e8", "e7", "e6", "e5", "e4", "e3", "e2", "e1", "e0"}},
		{5, "other", nil},
	} {
		c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Scope: tt.scope, Since: t0, Until: t0.AddDate(0, 0, 1), Latest: tt.latest})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range c.Matches {
			got = append(got, m.Item.EventID)
		}
		if got = got[:min(len(got), len(tt.want))]; !slices.Equal(got, tt.want) { // the picks; reserves after them
			t.Errorf("latest %d (scope %q): %v, want %v", tt.latest, tt.scope, got, tt.want)
		}
	}
}

// TestSearchLatestPrefersTopics: of the items near a run's middle, the one
// with the most words: a greeting, a thanks or an "ok" loses to the
// topic around it (a walk's month of chats: half the picks were small
// talk).
func TestSearchLatestPrefersTopics(t *testing.T) {
	ctx, s := setup(t)
	turns := [][2]string{
		{"hi there", "Hello! How can I help?"},
		{"Why is my pandas groupby so slow on a large frame?", "Groupby on object columns is slow; convert the keys to categoricals, sort once, and avoid apply with Python functions."},
		{"ok", "Anything else?"},
		{"thanks, bye!", "Bye, have a good evening!"},
		{"good morning", "Good morning! What's up?"},
		{"My knee hurts after running, should I rest?", "Rest a few days, ice it, and see a physiotherapist if the pain persists or swells."},
		{"lol yes", "Glad to hear it."},
		{"see you", "See you!"},
		{"hello again", "Hello again!"},
		{"Any ideas for a gift for Tom's birthday?", "A good pair of hiking boots, a cooking class for two, or a weekend in the Harz mountains."},
		{"perfect, that's all", "Great, talk soon."},
		{"night!", "Good night!"},
	}
	var ws []store.ContextWrite
	for i, qa := range turns {
		ws = append(ws, store.ContextWrite{UserID: "alice", Question: qa[0], Answer: qa[1], CreatedAt: t0.Add(time.Duration(i) * time.Hour), EventID: "e" + strconv.Itoa(i)})
	}
	seedContext(t, s, ws...)
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Since: t0, Until: t0.AddDate(0, 0, 1), Latest: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range c.Matches {
		got = append(got, m.Item.EventID)
	}
	if want := []string{"e9", "e5", "e1"}; !slices.Equal(got[:min(len(got), 3)], want) {
		t.Errorf("picks %v, want the three topics %v", got, want)
	}
}
