package store_test

import (
	"context"
	"errors"
	"math"
	"slices"
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

func TestSearchCandidates(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0, EventID: "e1", ConversationID: "c1"},
		store.ContextWrite{UserID: "alice", Question: "Where do I live?", Answer: "Paris, where my dog and my dog's dog live", CreatedAt: t0.Add(time.Hour), EventID: "e2"},
		store.ContextWrite{UserID: "alice", Question: "Favourite colour?", Answer: "blue", CreatedAt: t0, EventID: "e3"},
		store.ContextWrite{UserID: "bob", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0, EventID: "b1"},
	)
	c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{"dogs", "paris", "unmatched"}})
	if err != nil {
		t.Fatal(err)
	}
	// The query's lexemes are english stems, sorted.
	if !slices.Equal(c.Terms, []string{"dog", "pari", "unmatch"}) {
		t.Fatalf("terms %q", c.Terms)
	}
	// Over all of alice's items: question lengths 2 ("call", "dog"), 1
	// ("live") and 2 ("colour", "favourit"); answer lengths 1, 3 ("pari",
	// "dog", "live") and 1.
	if c.Stats.Items != 3 || math.Abs(c.Stats.AvgQuestionLen-5.0/3) > 1e-12 || math.Abs(c.Stats.AvgAnswerLen-5.0/3) > 1e-12 {
		t.Fatalf("stats %+v", c.Stats)
	}
	slices.SortFunc(c.Matches, func(a, b store.Candidate) int { return strings.Compare(a.Item.EventID, b.Item.EventID) })
	want := []store.Candidate{
		{Item: store.ContextItem{ID: ids[0], UserID: "alice", Question: "What is my dog called?", Answer: "Rex", CreatedAt: t0, EventID: "e1", ConversationID: "c1"},
			QuestionLen: 2, AnswerLen: 1, Terms: []store.TermCount{{Present: true, Question: 1}, {}, {}}},
		{Item: store.ContextItem{ID: ids[1], UserID: "alice", Question: "Where do I live?", Answer: "Paris, where my dog and my dog's dog live", CreatedAt: t0.Add(time.Hour), EventID: "e2"},
			QuestionLen: 1, AnswerLen: 3, Terms: []store.TermCount{{Present: true, Answer: 3}, {Present: true, Answer: 1}, {}}},
	}
	if len(c.Matches) != len(want) {
		t.Fatalf("candidates %+v, want alice's dog and Paris items", c.Matches)
	}
	for i, w := range want {
		g := c.Matches[i]
		if !g.Item.CreatedAt.Equal(w.Item.CreatedAt) {
			t.Fatalf("candidate %d created %v, want %v", i, g.Item.CreatedAt, w.Item.CreatedAt)
		}
		g.Item.CreatedAt = w.Item.CreatedAt
		if g.Item != w.Item || g.QuestionLen != w.QuestionLen || g.AnswerLen != w.AnswerLen || !slices.Equal(g.Terms, w.Terms) {
			t.Fatalf("candidate %d is\n%+v, want\n%+v", i, g, w)
		}
	}
	// No usable keyword: no candidate, and no round trip.
	if c, err := s.SearchContext(ctx, store.SearchQuery{UserID: "alice", Keywords: []string{" ", ""}}); err != nil || len(c.Matches) != 0 {
		t.Fatalf("blank keywords: %+v, %v", c, err)
	}
}

func TestSearchHostileKeywordsNeverError(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s, store.ContextWrite{UserID: "u", Question: "dog", Answer: "it's a dog", CreatedAt: t0})
	for _, q := range hostileQueries {
		for _, kws := range [][]string{{q}, strings.Fields(q), {q, "dog"}} {
			if _, err := s.SearchContext(ctx, store.SearchQuery{UserID: "u", Keywords: kws}); err != nil {
				t.Fatalf("search %q: %v", kws, err)
			}
			if _, _, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: kws}, MaxFacts: 5}); err != nil {
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
	facts, c, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: []string{"dog"}}, MaxFacts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 2 || facts[0].Key != "new" || facts[1].Key != "mid" {
		t.Fatalf("facts = %+v, want new then mid", facts)
	}
	if len(c.Matches) != 1 || c.Matches[0].Item.UserID != "u" || c.Stats.Items != 1 {
		t.Fatalf("candidates = %+v, want u's dog only", c)
	}
	// So few candidates come with their texts (Candidates.Texts); else
	// ContextTexts reads them, for the user's own items only.
	if !c.Texts || c.Matches[0].Item.Answer != "Rex" {
		t.Fatalf("candidate read with texts %v, answer %q; want Rex", c.Texts, c.Matches[0].Item.Answer)
	}
	items, err := s.ContextTexts(ctx, "u", []store.ContextItem{c.Matches[0].Item})
	if err != nil || len(items) != 1 || items[0].Answer != "Rex" || items[0].Question != "What is my dog called?" {
		t.Fatalf("ContextTexts = %+v, %v; want u's dog with its texts", items, err)
	}
	if items, err := s.ContextTexts(ctx, "other", []store.ContextItem{c.Matches[0].Item}); err != nil || len(items) != 0 {
		t.Fatalf("ContextTexts of u's item as other = %+v, %v; want none", items, err)
	}
	// No keywords: facts only, and no candidate.
	facts, c, err = s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u"}, MaxFacts: 10})
	if err != nil || len(facts) != 3 || len(c.Matches) != 0 {
		t.Fatalf("facts %d, candidates %+v, err %v", len(facts), c, err)
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
