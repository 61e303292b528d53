package enricher_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestSearchFindsVersionNumbers: a version, an address or a decimal in the
// message is searched whole, as the phrase of its numbers. Before, each
// number of "0.51.0" was a word of one or two characters, which a query
// leaves out, so "did 0.51.0 fix it?" searched "fix" alone and found
// nothing, and "pgx 5.12.0" ranked every note about pgx alike.
func TestSearchFindsVersionNumbers(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	h := start(t, st, nil)
	insertContext(t, st,
		store.ContextWrite{UserID: "alice", Question: "River upgrade?", Answer: "We moved to river 0.51.0 and the leader election bug is gone", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "River batching?", Answer: "river 0.50.1 added batch inserts, 0 51 jobs", CreatedAt: t0.Add(time.Minute)},
		store.ContextWrite{UserID: "alice", Question: "Which pgx?", Answer: "pgx 5.12.0 pinned in go.mod", CreatedAt: t0.Add(2 * time.Minute)},
		store.ContextWrite{UserID: "alice", Question: "pgx pool?", Answer: "pgx 5.7.1 pool settings were tuned", CreatedAt: t0.Add(3 * time.Minute)},
		store.ContextWrite{UserID: "alice", Question: "Router?", Answer: "the router is at 10.0.0.1", CreatedAt: t0.Add(4 * time.Minute)},
	)
	ctx := ctxT(t)
	for _, tt := range []struct {
		query, want string
		only        bool // the one result
	}{
		{"did 0.51.0 fix it?", "We moved to river 0.51.0 and the leader election bug is gone", true},
		{"what about pgx 5.12.0?", "pgx 5.12.0 pinned in go.mod", false},
		{"ssh 10.0.0.1", "the router is at 10.0.0.1", true},
	} {
		res, err := h.client.Search(ctx, events.SearchRequest{UserID: "alice", Query: tt.query})
		if err != nil || len(res.Results) == 0 || res.Results[0].Answer != tt.want || (tt.only && len(res.Results) != 1) {
			var got []string
			for _, r := range res.Results {
				got = append(got, r.Answer)
			}
			t.Errorf("search %q: %q, %v; want %q first (alone: %v)", tt.query, got, err, tt.want, tt.only)
		}
	}
}
