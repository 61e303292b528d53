package store_test

import (
	"cmp"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestSearchLatestMatchesReference checks latestCandidatesSQL's picks
// against a plain reading of SearchQuery.Latest, for every count of items
// around Latest (n < L, n == L, n == L+1, ...), with ties in created_at,
// items of another scope, out of the range and of another user.
func TestSearchLatestMatchesReference(t *testing.T) {
	ctx, s := setup(t)
	rng := rand.New(rand.NewSource(1))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	text := func() string {
		n := 1 + rng.Intn(len(words))
		out := ""
		for i := range n {
			out += words[(i+rng.Intn(3))%len(words)] + " "
		}
		return out
	}
	for n := 0; n <= 40; n++ {
		user := fmt.Sprintf("u%d", n)
		var ws []store.ContextWrite
		for i := range n {
			// Ties: several items share a created_at.
			at := t0.Add(time.Duration(i/3) * time.Minute)
			ws = append(ws, store.ContextWrite{UserID: user, Question: fmt.Sprint(i, " ", text()), Answer: text(), CreatedAt: at, EventID: fmt.Sprintf("%s-%d", user, i)})
		}
		// Out of the range, and another user's in it.
		ws = append(ws, store.ContextWrite{UserID: user, Question: "before", Answer: "x", CreatedAt: t0.Add(-time.Hour), EventID: user + "-before"},
			store.ContextWrite{UserID: user, Question: "after", Answer: "x", CreatedAt: t0.AddDate(0, 0, 1), EventID: user + "-after"},
			store.ContextWrite{UserID: user + "x", Question: "other user", Answer: "x", CreatedAt: t0, EventID: user + "-x"})
		seedContext(t, s, ws...)
		// Every fourth item of another scope.
		if _, err := s.Pool().Exec(ctx, `UPDATE context SET scope = 'other' WHERE user_id = $1 AND event_id ~ '-[0-9]+$'
			AND (substring(event_id from '-([0-9]+)$'))::int % 4 = 3`, user); err != nil {
			t.Fatal(err)
		}
		type row struct {
			id    int64
			event string
			at    time.Time
			size  int
			scope string
		}
		rows, err := s.Pool().Query(ctx, `SELECT id, event_id, created_at, question_len + answer_len, scope FROM context
			WHERE user_id = $1 AND created_at >= $2 AND created_at < $3`, user, t0, t0.AddDate(0, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		var all []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.event, &r.at, &r.size, &r.scope); err != nil {
				t.Fatal(err)
			}
			all = append(all, r)
		}
		rows.Close()
		if n == 40 && !slices.ContainsFunc(all, func(r row) bool { return r.scope == "other" }) {
			t.Fatal("no item of scope other")
		}
		for _, scope := range []string{"", "other"} {
			var in []row
			for _, r := range all {
				if scope == "" || r.scope == scope {
					in = append(in, r)
				}
			}
			slices.SortFunc(in, func(a, b row) int {
				if c := b.at.Compare(a.at); c != 0 {
					return c
				}
				return cmp.Compare(b.id, a.id)
			})
			m := len(in)
			for L := 1; L <= 12; L++ {
				var want []string
				for k := range L {
					lo, hi, mid := k*m/L, (k+1)*m/L, (2*k+1)*m/(2*L)
					if hi <= lo {
						continue
					}
					best := -1
					for x := lo; x < hi; x++ {
						// The seven nearest the middle within the run.
						o := min(max(mid-3, lo), max(hi-7, lo))
						if x < o || x >= o+7 {
							continue
						}
						if best < 0 || min(in[x].size, 40) > min(in[best].size, 40) {
							best = x
						} else if min(in[x].size, 40) == min(in[best].size, 40) {
							dx, db := x-mid, best-mid
							if dx < 0 {
								dx = -dx
							}
							if db < 0 {
								db = -db
							}
							if dx < db {
								best = x
							}
						}
					}
					want = append(want, in[best].event)
				}
				c, err := s.SearchContext(ctx, store.SearchQuery{UserID: user, Scope: scope, Since: t0, Until: t0.AddDate(0, 0, 1), Latest: L})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, mt := range c.Matches {
					got = append(got, mt.Item.EventID)
				}
				if m >= L && len(want) != L {
					t.Errorf("n %d L %d: reference has %d", m, L, len(want))
				}
				if m < L && len(want) != m {
					t.Errorf("n %d L %d: reference has %d", m, L, len(want))
				}
				// The picks, then reserves: each run's second choice, none
				// a pick, at most one a run.
				picks := got[:min(len(got), len(want))]
				if !slices.Equal(picks, want) {
					t.Errorf("n %d scope %q L %d: %v, want %v", m, scope, L, picks, want)
				}
				if reserves := got[len(picks):]; len(reserves) > len(want) || len(reserves) > m-len(want) {
					t.Errorf("n %d scope %q L %d: reserves %v after picks %v", m, scope, L, reserves, picks)
				} else {
					for _, r := range reserves {
						if slices.Contains(picks, r) {
							t.Errorf("n %d scope %q L %d: reserve %s is a pick", m, scope, L, r)
						}
					}
				}
			}
		}
	}
}
