package ranking_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// These tests rank real items: stored, stemmed and counted by Postgres, read
// by the store, ranked as enrich ranks them.

var t0 = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

func setup(t *testing.T) (context.Context, *store.Store) {
	t.Helper()
	t.Parallel()
	return context.Background(), storetest.New(t)
}

func seedContext(t *testing.T, s *store.Store, items ...store.ContextWrite) []int64 {
	t.Helper()
	ids, err := s.InsertContext(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// query is a ranked search.
type query struct {
	UserID    string
	Keywords  []string
	At        time.Time
	Threshold float64
	Limit     int
}

// search reads q's candidates and ranks them, as the search endpoint does.
func search(ctx context.Context, s *store.Store, q query) ([]store.ContextItem, error) {
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: q.UserID, Keywords: q.Keywords})
	if err != nil {
		return nil, err
	}
	return enricher.Rank(c, q.At, q.Threshold, q.Limit), nil
}

// wantScore is the documented score of an item whose only query match is one
// keyword, once, in a question of average length, among n items of which df
// hold the keyword, at the given age.
func wantScore(n, df float64, age time.Duration) float64 {
	idf := math.Log(1 + (n+ranking.IDFPrior-df+0.5)/(df+0.5))
	s := idf * 1 * (ranking.K1 + 1) / (1 + ranking.K1)
	days := age.Hours() / 24
	return s / (s + ranking.RelevanceHalf) * (1 - ranking.RecencyWeight + ranking.RecencyWeight/(1+days/ranking.RecencyDays))
}

func TestSearchScore(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s, store.ContextWrite{UserID: "u", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0})
	day := 24 * time.Hour
	tests := []struct {
		name string
		at   time.Time
		want float64
	}{
		{"fresh", t0, wantScore(1, 1, 0)},
		{"thirty days later", t0.Add(30 * day), wantScore(1, 1, 30*day)},
		{"ninety days later", t0.Add(90 * day), wantScore(1, 1, 90*day)},
		{"before the item counts as fresh", t0.Add(-day), wantScore(1, 1, 0)},
	}
	for _, tt := range tests {
		items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"dog"}, At: tt.at, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 || math.Abs(items[0].Score-tt.want) > 1e-6 {
			t.Fatalf("%s: items %+v, want score %.6f", tt.name, items, tt.want)
		}
	}
	// A user's only memory, matched in its question, passes the default
	// enrich threshold (0.3) even months later; recency is a bounded prior.
	if got := wantScore(1, 1, 365*day); got < 0.3 {
		t.Fatalf("a year-old exact question match scores %.3f, under the default threshold", got)
	}
	// The threshold applies to the same score.
	at := t0.Add(30 * day)
	th := wantScore(1, 1, 30*day) + 0.001
	items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"dog"}, At: at, Threshold: th, Limit: 1})
	if err != nil || len(items) != 0 {
		t.Fatalf("threshold %.3f over the score: items %+v, err %v", th, items, err)
	}
	items, err = search(ctx, s, query{UserID: "u", Keywords: []string{"dog"}, At: at, Threshold: th - 0.002, Limit: 1})
	if err != nil || len(items) != 1 {
		t.Fatalf("threshold just under the score: items %+v, err %v", items, err)
	}
}

func TestSearchRareKeywordWeighsMore(t *testing.T) {
	ctx, s := setup(t)
	w := []store.ContextWrite{
		{UserID: "u", Question: "I adopted a greyhound", Answer: "Lovely", CreatedAt: t0},
		{UserID: "u", Question: "I walked in the park", Answer: "Nice", CreatedAt: t0},
	}
	for i := range 8 { // "park" is in most of the user's items, "greyhound" in one
		w = append(w, store.ContextWrite{UserID: "u", Question: fmt.Sprintf("The park was busy on day %d", i), Answer: "ok", CreatedAt: t0})
	}
	ids := seedContext(t, s, w...)
	items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"greyhound", "park"}, At: t0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 10 || items[0].ID != ids[0] {
		t.Fatalf("want the item with the rare keyword first: %+v", items)
	}
	// The same single match is worth less when the word is common.
	if !(items[0].Score > items[1].Score) {
		t.Fatalf("rare match %.3f not above common match %.3f", items[0].Score, items[1].Score)
	}
}

func TestSearchShortFieldWins(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "u", Question: "Long story: the weather, the traffic, the office, the lunch, the meeting, the budget and my guitar lessons", Answer: "ok", CreatedAt: t0},
		store.ContextWrite{UserID: "u", Question: "My guitar lessons", Answer: "ok", CreatedAt: t0},
		store.ContextWrite{UserID: "u", Question: "Anything else?", Answer: "You mentioned guitar once", CreatedAt: t0},
	)
	items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"guitar"}, At: t0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Short question, then long question, then answer only.
	if len(items) != 3 || items[0].ID != ids[1] || items[1].ID != ids[0] || items[2].ID != ids[2] {
		t.Fatalf("want %d, %d, %d: %+v", ids[1], ids[0], ids[2], items)
	}
}

func TestSearchRecencyIsBounded(t *testing.T) {
	ctx, s := setup(t)
	year := 365 * 24 * time.Hour
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "u", Question: "My sister Ana lives in Porto", Answer: "Nice", CreatedAt: t0.Add(-year)},
		store.ContextWrite{UserID: "u", Question: "Lunch today", Answer: "Ana said hi", CreatedAt: t0},
	)
	items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"sister", "ana", "porto"}, At: t0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != ids[0] {
		t.Fatalf("a much better match a year old should rank above a weak one from today: %+v", items)
	}
}

func TestSearchNewestFirstOnEqualRelevance(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "u", Question: "dog food", Answer: "brand A", CreatedAt: t0.Add(-60 * 24 * time.Hour)},
		store.ContextWrite{UserID: "u", Question: "dog food", Answer: "brand B", CreatedAt: t0.Add(-1 * 24 * time.Hour)},
	)
	items, err := search(ctx, s, query{UserID: "u", Keywords: []string{"dog"}, At: t0, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != ids[1] || items[1].ID != ids[0] {
		t.Fatalf("want newest (%d) then oldest (%d): %+v", ids[1], ids[0], items)
	}
}
