package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestRecallShapesAgree: every shape's Matches are the full read's
// narrowed by scope and range; a DF, when given, has one entry per term and
// equals the full read's per-term document frequency; bob is never read
// nor counted. Every shape (scoped, ranged open or closed, hybrid) over
// queries of one lexeme, of a term never used, of phrases (a hyphenated
// word, a CJK run, a dotted version), of none and of stop words only.
func TestRecallShapesAgree(t *testing.T) {
	ctx, s := setup(t)
	day := func(n int) time.Time { return t0.AddDate(0, 0, n) }
	var ws []store.ContextWrite
	texts := []string{"dentist visit", "dentists again and the e-mail", "東京タワーに行った dentist", "upgrade to 0.51.0 soon", "the zebra e-mail", "lunch soup", "dentist e-mail 0.51.0"}
	for i, tx := range texts {
		for d := 0; d < 3; d++ {
			ws = append(ws, store.ContextWrite{UserID: "alice", Question: fmt.Sprintf("%s %d", tx, d), Answer: "ok", CreatedAt: day(7*d + i), EventID: fmt.Sprintf("a%d-%d", i, d)})
			ws = append(ws, store.ContextWrite{UserID: "bob", Question: fmt.Sprintf("%s %d", tx, d), Answer: "ok", CreatedAt: day(7*d + i), EventID: fmt.Sprintf("b%d-%d", i, d)})
		}
	}
	ids := seedContext(t, s, ws...)
	if _, err := s.Pool().Exec(ctx, `UPDATE context SET scope = 'work' WHERE event_id ~ '-1$'`); err != nil {
		t.Fatal(err)
	}
	scopeOf := func(e string) string {
		if e[len(e)-2:] == "-1" {
			return "work"
		}
		return "default"
	}
	byEvent := map[string]int64{}
	for i, w := range ws {
		byEvent[w.EventID] = ids[i]
	}
	kwsets := [][]string{{"dentist"}, {"dentist", "zebra", "unicorn"}, {"e-mail"}, {"東京タワー"}, {"0.51.0"}, {}, {"the"}, {"dentist", "dentists"}, {"soup", "e-mail"}}
	for _, kws := range kwsets {
		full, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: kws})
		if err != nil {
			t.Fatal(err)
		}
		fullDF := make([]int, len(full.Terms))
		for _, m := range full.Matches {
			for i, tc := range m.Terms {
				if tc.Present {
					fullDF[i]++
				}
			}
		}
		for _, scope := range []string{"", "work"} {
			for _, rng := range [][2]time.Time{{}, {day(5), day(16)}, {day(5), {}}, {{}, day(9)}} {
				for _, hybrid := range []bool{false, true} {
					q := store.SearchQuery{UserID: "alice", Keywords: kws, Scope: scope, Since: rng[0], Until: rng[1], Hybrid: hybrid}
					if hybrid {
						q.VectorIDs = []int64{byEvent["b5-0"], byEvent["a5-0"], byEvent["a5-1"], byEvent["a5-2"]}
					}
					name := fmt.Sprintf("%q scope=%q range=%v hybrid=%v", kws, scope, rng, hybrid)
					c, err := s.SearchContext(ctx, q)
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					in := func(it store.ContextItem) bool {
						return (scope == "" || scopeOf(it.EventID) == scope) && (rng[0].IsZero() || !it.CreatedAt.Before(rng[0])) && (rng[1].IsZero() || it.CreatedAt.Before(rng[1]))
					}
					var want, got []string
					for _, m := range full.Matches {
						if in(m.Item) {
							want = append(want, m.Item.EventID)
						}
					}
					if hybrid {
						for _, e := range []string{"a5-0", "a5-1", "a5-2"} {
							it := ws[slices.IndexFunc(ws, func(w store.ContextWrite) bool { return w.EventID == e })]
							if in(store.ContextItem{EventID: it.EventID, CreatedAt: it.CreatedAt}) && !slices.Contains(want, e) {
								want = append(want, e)
							}
						}
					}
					for _, m := range c.Matches {
						got = append(got, m.Item.EventID)
					}
					slices.Sort(want)
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Errorf("%s: matches %v, want %v", name, got, want)
					}
					if c.DF != nil {
						if len(c.DF) != len(c.Terms) {
							t.Errorf("%s: DF %v for terms %v", name, c.DF, c.Terms)
						} else if scope == "" && !slices.Equal(c.DF, fullDF) {
							t.Errorf("%s: DF %v, want the full read's %v (terms %v)", name, c.DF, fullDF, c.Terms)
						}
					}
				}
			}
		}
	}
}
