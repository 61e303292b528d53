package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestRecallPruned: a pruned recall skips the lexemes more than the share
// of the user's items hold (never the rarest), reads only the items holding
// another one, with the counts of every lexeme, and gives every lexeme's
// document frequency, the same as a full read's; the rest of it (Except)
// reads the other candidates; and it is a full read
// (no DF) when the user is under MinItems, the query is a phrase, or it
// has a scope, a range or a vector side.
func TestRecallPruned(t *testing.T) {
	ctx, s := setup(t)
	// 20 items: "coffee" in 16, "tea" in 10, "saxophone" in 2, "piano" in 1
	// (with coffee), and another user's saxophone.
	var items []store.ContextWrite
	for i := range 20 {
		q := fmt.Sprintf("note %d", i)
		if i < 16 {
			q += " coffee"
		}
		if i%2 == 0 {
			q += " tea"
		}
		if i == 17 || i == 18 {
			q += " saxophone"
		}
		if i == 3 {
			q += " piano"
		}
		items = append(items, store.ContextWrite{UserID: "u", Question: q, Answer: "ok", CreatedAt: t0.Add(time.Duration(i) * time.Minute), EventID: fmt.Sprint("e", i)})
	}
	items = append(items, store.ContextWrite{UserID: "v", Question: "saxophone coffee", Answer: "ok", CreatedAt: t0})
	seedContext(t, s, items...)

	recall := func(t *testing.T, q store.SearchQuery) store.Candidates {
		t.Helper()
		_, c, err := s.Recall(ctx, store.RecallQuery{SearchQuery: q, MaxFacts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	events := func(c store.Candidates) []string {
		var out []string
		for _, m := range c.Matches {
			out = append(out, m.Item.EventID)
		}
		slices.Sort(out)
		return out
	}
	// Terms are sorted: coffe, piano, saxophon, tea.
	kw := []string{"coffee", "tea", "saxophone", "piano"}
	full := recall(t, store.SearchQuery{UserID: "u", Keywords: kw})
	if full.DF != nil || full.Skipped != nil || len(full.Matches) != 19 {
		t.Fatalf("full read: DF %v, skipped %v, %d matches; want no DF and 19 matches", full.DF, full.Skipped, len(full.Matches))
	}
	wantDF := []int{16, 1, 2, 10}

	t.Run("skips common lexemes", func(t *testing.T) {
		c := recall(t, store.SearchQuery{UserID: "u", Keywords: kw, Prune: store.Prune{Share: 0.4, MinItems: 10}})
		if !slices.Equal(c.Terms, full.Terms) || !slices.Equal(c.DF, wantDF) || !slices.Equal(c.Skipped, []bool{true, false, false, true}) {
			t.Fatalf("terms %v, DF %v, skipped %v; want DF %v with coffee and tea skipped", c.Terms, c.DF, c.Skipped, wantDF)
		}
		if got := events(c); !slices.Equal(got, []string{"e17", "e18", "e3"}) {
			t.Fatalf("pruned matches %v, want the saxophone and piano items", got)
		}
		if c.Stats != full.Stats {
			t.Errorf("stats %+v, want the full read's %+v", c.Stats, full.Stats)
		}
		// Each match carries every lexeme's counts, as in the full read.
		byID := map[int64][]store.TermCount{}
		for _, m := range full.Matches {
			byID[m.Item.ID] = m.Terms
		}
		for _, m := range c.Matches {
			if !slices.Equal(m.Terms, byID[m.Item.ID]) {
				t.Errorf("%s counts %v, want %v", m.Item.EventID, m.Terms, byID[m.Item.ID])
			}
		}
	})
	t.Run("the rest", func(t *testing.T) {
		c := recall(t, store.SearchQuery{UserID: "u", Keywords: kw, Prune: store.Prune{Except: []string{"piano", "saxophon"}}})
		if c.DF != nil || c.Skipped != nil {
			t.Fatalf("DF %v, skipped %v; want neither", c.DF, c.Skipped)
		}
		got := events(c)
		if len(got) != 16 || slices.Contains(got, "e3") || slices.Contains(got, "e17") || slices.Contains(got, "e18") {
			t.Fatalf("rest matches %v, want the 16 items holding neither piano nor saxophone", got)
		}
		got = append(got, "e17", "e18", "e3")
		slices.Sort(got)
		if want := events(full); !slices.Equal(got, want) {
			t.Fatalf("the rest and the pruned read's matches are %v, want the full read's %v", got, want)
		}
	})
	t.Run("never skips the rarest", func(t *testing.T) {
		c := recall(t, store.SearchQuery{UserID: "u", Keywords: []string{"coffee", "tea"}, Prune: store.Prune{Share: 0.1, MinItems: 10}})
		if !slices.Equal(c.DF, []int{16, 10}) || !slices.Equal(c.Skipped, []bool{true, false}) || len(c.Matches) != 10 {
			t.Fatalf("DF %v, skipped %v, %d matches; want tea kept and only its 10 items read", c.DF, c.Skipped, len(c.Matches))
		}
		if c := recall(t, store.SearchQuery{UserID: "u", Keywords: []string{"coffee"}, Prune: store.Prune{Share: 0.1}}); c.Skipped != nil || len(c.Matches) != 16 {
			t.Fatalf("one lexeme: skipped %v, %d matches; want it kept", c.Skipped, len(c.Matches))
		}
	})
	for _, tt := range []struct {
		name string
		q    store.SearchQuery
	}{
		{"under MinItems", store.SearchQuery{Prune: store.Prune{Share: 0.4, MinItems: 21}}},
		{"a phrase", store.SearchQuery{Keywords: []string{"coffee note", "saxophone"}, Prune: store.Prune{Share: 0.4}}},
		{"a scope", store.SearchQuery{Scope: "default", Prune: store.Prune{Share: 0.4}}},
		{"a range", store.SearchQuery{Since: t0, Prune: store.Prune{Share: 0.4}}},
		{"hybrid", store.SearchQuery{Hybrid: true, Prune: store.Prune{Share: 0.4}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.UserID = "u"
			if q.Keywords == nil {
				q.Keywords = kw
			}
			c := recall(t, q)
			// A range's read gives the whole memory's DF (ranged reads
			// do: TestSearchRange), never a pruned read's skips.
			if ranged := !q.Since.IsZero(); c.Skipped != nil || (c.DF != nil) != ranged {
				t.Fatalf("skipped %v, DF %v; want a full read's (neither skipped, DF only for a range)", c.Skipped, c.DF)
			}
			unpruned := q
			unpruned.Prune = store.Prune{}
			if got, want := events(c), events(recall(t, unpruned)); !slices.Equal(got, want) {
				t.Fatalf("matches %v, want the unpruned read's %v", got, want)
			}
		})
	}
	if _, _, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: kw, Prune: store.Prune{Share: 1}}, MaxFacts: 1}); err == nil {
		t.Error("a share of 1 was accepted")
	}
}
