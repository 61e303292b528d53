package store_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// hostileQueries break naive tsquery building: operators, quotes,
// backslashes, NUL, invalid UTF-8, huge words.
var hostileQueries = []string{
	"", " ", "'", "''", `\`, `\\'`, "&", "|", "!", ":", "*", "(", ")", "<->", "<2>",
	"a & b | !c", "dog:*", "dog:A", "'dog' | 'cat'", "foo\\'bar", "(((", ")))", "!!!!",
	"it's", "don't", "\x00", "dog\x00cat", "\xff\xfe", "caf\xc3", "日本語のテキスト",
	"ÆØÅ ß", "emoji 🐕 dog", strings.Repeat("a", 3000), strings.Repeat("dog ", 500),
	"SELECT * FROM context; --", "$1", "%s", "\u202edog",
}

func seedContext(t *testing.T, s *store.Store, items ...store.ContextWrite) []int64 {
	t.Helper()
	ids, err := s.InsertContext(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestTSQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		keywords []string
		want     string
	}{
		{"none", nil, ""},
		{"one", []string{"dog"}, "'dog'"},
		{"or", []string{"dog", "paris"}, "'dog' | 'paris'"},
		{"quote and backslash", []string{`it's`, `a\b`}, `'it''s' | 'a\\b'`},
		{"operators stay inside quotes", []string{"a&b|!c:*"}, "'a&b|!c:*'"},
		{"empty and blank skipped", []string{"", "  ", "x"}, "'x'"},
		{"nul removed", []string{"do\x00g"}, "'do g'"},
		{"invalid utf8 replaced", []string{"caf\xc3"}, "'caf'"},
		{"too long skipped", []string{strings.Repeat("a", store.MaxKeywordBytes+1), "b"}, "'b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := store.TSQuery(tt.keywords); got != tt.want {
				t.Fatalf("TSQuery(%q) = %q, want %q", tt.keywords, got, tt.want)
			}
		})
	}
	many := make([]string, store.MaxKeywords+10)
	for i := range many {
		many[i] = "w"
	}
	if n := strings.Count(store.TSQuery(many), "'w'"); n != store.MaxKeywords {
		t.Fatalf("TSQuery kept %d keywords, want %d", n, store.MaxKeywords)
	}
}

func TestSearchIsOrAndPerUser(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0, EventID: "e1"},
		store.ContextWrite{UserID: "alice", Question: "Where do I live?", Answer: "Paris", CreatedAt: t0, EventID: "e2"},
		store.ContextWrite{UserID: "alice", Question: "Favourite colour?", Answer: "blue", CreatedAt: t0, EventID: "e3"},
		store.ContextWrite{UserID: "bob", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0, EventID: "b1"},
	)
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"dog", "paris", "unmatched"}, At: t0, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 {
		t.Fatalf("got %d items, want the dog and the Paris items: %+v", len(items), items)
	}
	for _, it := range items {
		if it.UserID != "alice" || (it.ID != ids[0] && it.ID != ids[1]) {
			t.Fatalf("unexpected item %+v", it)
		}
	}
	// The dog item matches in the question (weight A), Paris in the answer.
	if items[0].ID != ids[0] || !(items[0].Score > items[1].Score) {
		t.Fatalf("want question match first with a higher score: %+v", items)
	}
}

// wantScore is the documented score of an item whose only query match is one
// keyword, once, in a question of average length, among n items of which df
// hold the keyword, at the given age.
func wantScore(n, df float64, age time.Duration) float64 {
	idf := math.Log(1 + (n+store.IDFPrior-df+0.5)/(df+0.5))
	s := idf * 1 * (store.K1 + 1) / (1 + store.K1)
	days := age.Hours() / 24
	return s / (s + store.RelevanceHalf) * (1 - store.RecencyWeight + store.RecencyWeight/(1+days/store.RecencyDays))
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
		items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"dog"}, At: tt.at, Limit: 1})
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
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"dog"}, At: at, Threshold: th, Limit: 1})
	if err != nil || len(items) != 0 {
		t.Fatalf("threshold %.3f over the score: items %+v, err %v", th, items, err)
	}
	items, err = s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"dog"}, At: at, Threshold: th - 0.002, Limit: 1})
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
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"greyhound", "park"}, At: t0, Limit: 10})
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
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"guitar"}, At: t0, Limit: 10})
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
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"sister", "ana", "porto"}, At: t0, Limit: 10})
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
	items, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: []string{"dog"}, At: t0, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].ID != ids[1] || items[1].ID != ids[0] {
		t.Fatalf("want newest (%d) then oldest (%d): %+v", ids[1], ids[0], items)
	}
}

func TestSearchHostileKeywordsNeverError(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s, store.ContextWrite{UserID: "u", Question: "dog", Answer: "it's a dog", CreatedAt: t0})
	for _, q := range hostileQueries {
		for _, kws := range [][]string{{q}, strings.Fields(q), {q, "dog"}} {
			if _, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: kws, Limit: 3}); err != nil {
				t.Fatalf("search %q: %v", kws, err)
			}
			if _, _, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: kws, Limit: 3}, MaxFacts: 5}); err != nil {
				t.Fatalf("recall %q: %v", kws, err)
			}
		}
	}
}

func TestRecall(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "u", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0},
		store.ContextWrite{UserID: "other", Question: "What is my dog called?", Answer: "Fido", CreatedAt: t0},
	)
	if _, err := s.UpsertFacts(ctx, []store.FactWrite{
		{UserID: "u", Key: "old", Value: "1", SourceAt: t0},
		{UserID: "u", Key: "mid", Value: "2", SourceAt: t0.Add(time.Hour)},
		{UserID: "u", Key: "new", Value: "3", SourceAt: t0.Add(2 * time.Hour)},
		{UserID: "other", Key: "secret", Value: "x", SourceAt: t0.Add(3 * time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	facts, items, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: []string{"dog"}, At: t0, Limit: 5}, MaxFacts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 2 || facts[0].Key != "new" || facts[1].Key != "mid" {
		t.Fatalf("facts = %+v, want new then mid", facts)
	}
	if len(items) != 1 || items[0].Answer != "Rex" {
		t.Fatalf("items = %+v, want u's dog only", items)
	}
	// No keywords: facts only, and an empty (not nil) item list.
	facts, items, err = s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Limit: 5}, MaxFacts: 10})
	if err != nil || len(facts) != 3 || items == nil || len(items) != 0 {
		t.Fatalf("facts %d, items %v, err %v", len(facts), items, err)
	}
}

func TestStoreContextReportsDuplicate(t *testing.T) {
	ctx, s := setup(t)
	w := store.ContextWrite{UserID: "u", Question: "Dog?", Answer: "Rex", Provenance: store.Provenance{Extractor: "direct"}}
	id, inserted, err := s.StoreContext(ctx, w)
	if err != nil || !inserted || id == 0 {
		t.Fatalf("first store: id %d inserted %v err %v", id, inserted, err)
	}
	w.Question = "  dog? "
	id2, inserted, err := s.StoreContext(ctx, w)
	if err != nil || inserted || id2 != id {
		t.Fatalf("duplicate store: id %d (want %d) inserted %v err %v", id2, id, inserted, err)
	}
	items, err := s.RecentContext(ctx, "u", 5)
	if err != nil || len(items) != 1 || items[0].CreatedAt.IsZero() {
		t.Fatalf("items %+v, err %v", items, err)
	}
}

func TestDeleteContext(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "u", Question: "What is my  DOG called?", Answer: "Rex", CreatedAt: t0},
		store.ContextWrite{UserID: "u", Question: "Where do I live?", Answer: "Paris", CreatedAt: t0},
		store.ContextWrite{UserID: "u", Question: "Favourite colour?", Answer: "blue", CreatedAt: t0},
		store.ContextWrite{UserID: "v", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0},
	)
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "u"}); !errors.Is(err, store.ErrEmptySelection) {
		t.Fatalf("empty selection: err %v", err)
	}
	steps := []struct {
		name string
		d    store.ContextDelete
		want int64
	}{
		{"other user's id", store.ContextDelete{UserID: "u", ID: ids[3]}, 0},
		{"question, normalised", store.ContextDelete{UserID: "u", Question: "what is my dog  called?"}, 1},
		{"id and wrong question", store.ContextDelete{UserID: "u", ID: ids[1], Question: "nope"}, 0},
		{"id", store.ContextDelete{UserID: "u", ID: ids[1]}, 1},
		{"all", store.ContextDelete{UserID: "u", All: true}, 1},
	}
	for _, st := range steps {
		n, err := s.DeleteContext(ctx, st.d)
		if err != nil || n != st.want {
			t.Fatalf("%s: deleted %d, err %v; want %d", st.name, n, err, st.want)
		}
	}
	if n, _ := s.CountContext(ctx, "v"); n != 1 {
		t.Fatalf("v has %d items, want 1 (untouched)", n)
	}
}
