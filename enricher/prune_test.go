package enricher_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// pruneStore is a real store that records what each of enrich's reads
// asked and skipped. It lets a pruned read prune any user (the test's are
// far under enrich's fewest items for it), and with full it strips the
// pruning: the reads whose replies a pruned enrich must give.
type pruneStore struct {
	*store.Store
	full  bool
	mu    sync.Mutex
	reads []string // "pruned", "pruned, skipped", "rest" or "full", in order
	// asked is, for each keyword-only read of all a user's memory but a
	// rest read, whether enrich or search asked it to prune, before the
	// store made it prune (or not, with full).
	asked []bool
}

func (s *pruneStore) Recall(ctx context.Context, q store.RecallQuery) ([]store.Fact, store.Candidates, error) {
	var facts []store.Fact
	c, err := s.read(q.SearchQuery, func(sq store.SearchQuery) (c store.Candidates, err error) {
		q.SearchQuery = sq
		facts, c, err = s.Store.Recall(ctx, q)
		return c, err
	})
	return facts, c, err
}

func (s *pruneStore) SearchCandidates(ctx context.Context, q store.SearchQuery) (store.Candidates, error) {
	return s.read(q, func(q store.SearchQuery) (store.Candidates, error) { return s.Store.SearchCandidates(ctx, q) })
}

// read records and makes one read of q.
func (s *pruneStore) read(q store.SearchQuery, do func(store.SearchQuery) (store.Candidates, error)) (store.Candidates, error) {
	kind := "full"
	if q.Prunable() && len(q.Prune.Except) == 0 {
		s.mu.Lock()
		s.asked = append(s.asked, q.Prune.Share > 0)
		s.mu.Unlock()
	}
	if !s.full && q.Prunable() && q.Prune.Share == 0 && len(q.Prune.Except) == 0 {
		// A user enrich saw under the fewest items for pruning is read
		// plainly (TestSmallUserReadPlainly); here every user is pruned.
		q.Prune = enricher.ReadPrune()
	}
	switch {
	case len(q.Prune.Except) > 0:
		kind = "rest"
	case q.Prune.Share > 0:
		q.Prune.MinItems = 0
		kind = "pruned"
	}
	if s.full {
		q.Prune, kind = store.Prune{}, "full"
	}
	c, err := do(q)
	if c.Skipped != nil {
		kind += ", skipped"
	}
	s.mu.Lock()
	s.reads = append(s.reads, kind)
	s.mu.Unlock()
	return c, err
}

func (s *pruneStore) take() []string { return takeAll(&s.mu, &s.reads) }

func (s *pruneStore) takeAsked() []bool { return takeAll(&s.mu, &s.asked) }

// takeAll returns *list and empties it, under mu.
func takeAll[T any](mu *sync.Mutex, list *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	l := *list
	*list = nil
	return l
}

// TestEnrichPrunedReadIsExact: enrich's keyword read (and search's) skips
// the items that hold only words common in the user's memory, and its
// reply is the reply
// of a read of every candidate: at once when no skipped item can rank, and
// after reading the rest of the candidates when one may (the items holding
// three common words outrank the one rare match).
func TestEnrichPrunedReadIsExact(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seedPruneUser(t, st, at)
	pruned := &pruneStore{Store: st}
	full := &pruneStore{Store: st, full: true}
	hp, hf := start(t, pruned, nil), start(t, full, nil)
	for _, tt := range []struct {
		name, message string
		reads         []string
	}{
		{"exact by the bound", "Where do I take saxophone lessons, with coffee?", []string{"pruned, skipped"}},
		{"the rest read when a skipped item may rank", "How is the garden, the tomato and the watering? My saxophone?", []string{"pruned, skipped", "rest"}},
		{"nothing skipped", "saxophone lessons", []string{"pruned"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := events.EnrichRequest{UserID: "u", Message: tt.message, At: at}
			got := enrich(t, hp, req)
			want := enrich(t, hf, req)
			if reads := pruned.take(); !slices.Equal(reads, tt.reads) {
				t.Errorf("reads %q, want %q", reads, tt.reads)
			}
			full.take()
			if got.Degraded || want.Degraded || len(want.Context) == 0 {
				t.Fatalf("replies degraded %v/%v, full read's context %+v", got.Degraded, want.Degraded, want.Context)
			}
			if !slices.EqualFunc(got.Context, want.Context, func(a, b events.ContextItem) bool {
				return a.ID == b.ID && a.Score == b.Score
			}) || got.Injection != want.Injection {
				t.Fatalf("pruned reply's context\n%+v\nwant the full read's\n%+v", got.Context, want.Context)
			}

			// search reads as enrich does: the candidates without texts,
			// pruned, then the hits' texts.
			sreq := events.SearchRequest{UserID: "u", Query: tt.message}
			gotS, err := hp.client.Search(ctxT(t), sreq)
			if err != nil {
				t.Fatal(err)
			}
			wantS, err := hf.client.Search(ctxT(t), sreq)
			if err != nil {
				t.Fatal(err)
			}
			if reads := pruned.take(); len(reads) == 0 || reads[0] == "full" {
				t.Errorf("search's reads %q, want a pruned one first", reads)
			}
			full.take()
			if len(wantS.Results) == 0 || !slices.EqualFunc(gotS.Results, wantS.Results, func(a, b events.ContextItem) bool {
				return a.ID == b.ID && a.Answer == b.Answer && a.Question == b.Question
			}) {
				t.Fatalf("pruned search's results\n%+v\nwant the full read's\n%+v", gotS.Results, wantS.Results)
			}
			for _, r := range gotS.Results {
				if r.Question == "" || r.Answer == "" || r.EventID == "" {
					t.Fatalf("search result %+v came without its texts", r)
				}
			}
		})
	}
}

// TestPrunedReadSeesAnEditBetweenItsReads: an edit landing between a
// pruned read and its rest read that gives an item a kept word (it held
// only skipped ones) would leave the item out of both, the first read
// having missed it and the second excluding it; the reads see the user's
// generation move and read every candidate again, so the hits are a full
// read's after the edit.
func TestPrunedReadSeesAnEditBetweenItsReads(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := seedPruneUser(t, st, at)
	edited := ids[30] // "entry 30 about coffee watering": skipped words only
	question := "saxophone, garden, tomato and watering, all of it"

	var reads []string
	read := readsBetween(st, &reads, func(ctx context.Context, c store.Candidates) {
		if slices.ContainsFunc(c.Matches, func(m store.Candidate) bool { return m.Item.ID == edited }) {
			t.Fatalf("the pruned read holds item %d, which has only skipped words", edited)
		}
		if _, err := st.UpdateContext(ctx, store.ContextUpdate{UserID: "u", ID: edited, Question: &question}); err != nil {
			t.Fatal(err)
		}
	})
	q := store.SearchQuery{UserID: "u", Keywords: enricher.Keywords("How is the garden, the tomato and the watering? My saxophone?")}
	_, _, got, rest, err := enricher.PrunedRead(ctxT(t), read, q, enricher.ReadPrune(), at, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !rest || len(reads) < 2 || reads[0] != "pruned" || reads[1] != "rest" {
		t.Fatalf("reads %q (rest %v), want a pruned read and its rest", reads, rest)
	}

	full, err := st.SearchCandidates(ctxT(t), q)
	if err != nil {
		t.Fatal(err)
	}
	want := enricher.Rank(full, at, 0, 5)
	if len(want) == 0 || want[0].ID != edited {
		t.Fatalf("a full read's hits %+v, want the edited item %d first", want, edited)
	}
	if !slices.EqualFunc(got, want, func(a, b store.ContextItem) bool { return a.ID == b.ID && a.Score == b.Score }) {
		t.Fatalf("hits %+v (reads %q), want a full read's after the edit %+v", got, reads, want)
	}
}

// TestExactReadNeedsLimitHitsOverTheBound: a pruned read's hits are the
// full read's only when the bound is under the threshold or limit hits
// score more than it: fewer hits, or a last hit scoring the bound itself
// (a skipped item may tie it, and win on its time), cannot tell.
func TestExactReadNeedsLimitHitsOverTheBound(t *testing.T) {
	t.Parallel()
	c := store.Candidates{Stats: store.ItemStats{Items: 5000, AvgQuestionLen: 10, AvgAnswerLen: 10},
		Terms: []string{"rare", "common"}, DF: []int{3, 2000}, Skipped: []bool{false, true}}
	bound, ok := ranking.DefaultParams().MaxScore(ranking.Collection(c.Stats), c.DF, c.Skipped)
	if !ok || !(bound > 0.05 && bound < 0.95) {
		t.Fatalf("MaxScore = %v, %v", bound, ok)
	}
	over := func(scores ...float64) []store.ContextItem {
		var items []store.ContextItem
		for i, s := range scores {
			items = append(items, store.ContextItem{ID: int64(i + 1), Score: s})
		}
		return items
	}
	for _, tt := range []struct {
		name      string
		items     []store.ContextItem
		threshold float64
		limit     int
		exact     bool
	}{
		{"limit hits over the bound", over(0.99, 0.98, bound+0.01), 0, 3, true},
		{"fewer hits than limit", over(0.99, 0.98), 0, 3, false},
		{"the last hit at the bound", over(0.99, 0.98, bound), 0, 3, false},
		{"the last hit under the bound", over(0.99, 0.98, bound-0.01), 0, 3, false},
		{"the bound under the threshold", over(0.99), bound + 0.01, 3, true},
		{"the bound at the threshold", over(0.99), bound, 3, false},
		{"nothing skipped", nil, 0, 3, true},
	} {
		c := c
		if tt.name == "nothing skipped" {
			c.Skipped = nil
		}
		if got := enricher.ExactRead(c, tt.items, tt.threshold, tt.limit); got != tt.exact {
			t.Errorf("%s: ExactRead = %v, want %v", tt.name, got, tt.exact)
		}
	}
}

// seedPruneUser gives user u 42 items in which "coffee" is in 41 and
// "garden", "tomato" and "watering" in 18 each, all three in the first 9
// (common: a pruned read skips them), "saxophone" in 2 (rare: kept), and
// user v one item of all those words. It returns the items' ids in that
// order: item i is "entry i about coffee …" for i < 40.
func seedPruneUser(t *testing.T, st *store.Store, at time.Time) []int64 {
	t.Helper()
	var items []store.ContextWrite
	add := func(user, q, a string) {
		items = append(items, store.ContextWrite{UserID: user, Question: q, Answer: a,
			CreatedAt: at.Add(-time.Duration(len(items)+1) * time.Hour), EventID: fmt.Sprint("e", len(items))})
	}
	for i := range 40 {
		// "coffee" in 41 of u's 42 items (a saxophone item holds it too);
		// "garden", "tomato" and "watering" in 18 each, all three in the
		// first 9.
		q := fmt.Sprintf("entry %d about coffee", i)
		if i < 18 {
			q += " garden"
		}
		if i < 9 || (i >= 18 && i < 27) {
			q += " tomato"
		}
		if i < 9 || (i >= 27 && i < 36) {
			q += " watering"
		}
		add("u", q, "noted")
	}
	add("u", "my saxophone lessons, then coffee", "on Tuesdays")
	add("u", "a long evening", "we spoke of jazz, a saxophone solo, records and much else besides that evening")
	// Another user's matches change nothing of u's.
	add("v", "coffee saxophone garden tomato watering", "v's")
	return insertContext(t, st, items...)
}

// TestPrunedReadSeesALanguageChangeBetweenItsReads: a change of the
// user's language (store.SetLanguage) re-indexes every item; when the
// query's words have the same lexemes under both configurations (so the
// Terms check cannot tell), an item that the new configuration gives a kept
// lexeme ("gardens" is "gardens" under simple, "garden" under english)
// would be in neither read: the pruned read, under simple, saw it hold only
// the skipped "tomato"; the rest read, under english, excludes it for
// holding "garden". It is a candidate before the change and after it, so a
// reply without it is no read's. The generation must move (or the Terms
// check be joined by something that sees a re-index).
func TestPrunedReadSeesALanguageChangeBetweenItsReads(t *testing.T) {
	t.Parallel()
	st := storetest.New(t)
	ctx := ctxT(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := st.SetLanguage(ctx, "u", "simple", "simple"); err != nil {
		t.Fatal(err)
	}
	var items []store.ContextWrite
	add := func(q, a string) {
		items = append(items, store.ContextWrite{UserID: "u", Question: q, Answer: a,
			CreatedAt: at.Add(-time.Duration(len(items)+1) * time.Hour), EventID: fmt.Sprint("e", len(items))})
	}
	for i := range 20 {
		add(fmt.Sprintf("entry %d tomato", i), "noted") // "tomato": common, skipped
	}
	add("my garden", "noted") // "garden": rare, kept
	add("gardens and a tomato", "noted")
	ids := insertContext(t, st, items...)
	moved := ids[len(ids)-1]

	q := store.SearchQuery{UserID: "u", Keywords: []string{"garden", "tomato"}}
	var reads []string
	read := readsBetween(st, &reads, func(ctx context.Context, c store.Candidates) {
		if c.Skipped == nil {
			t.Fatalf("the pruned read skipped nothing (terms %q, df %v)", c.Terms, c.DF)
		}
		if slices.ContainsFunc(c.Matches, func(m store.Candidate) bool { return m.Item.ID == moved }) {
			t.Fatalf("the pruned read holds item %d, which has only skipped words under simple", moved)
		}
		if n, err := st.SetLanguage(ctx, "u", "en", "english"); err != nil || n == 0 {
			t.Fatalf("set language: %d items re-indexed, %v", n, err)
		}
	})
	_, _, got, rest, err := enricher.PrunedRead(ctx, read, q, enricher.ReadPrune(), at, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if !rest || len(reads) < 2 || reads[0] != "pruned" || reads[1] != "rest" {
		t.Fatalf("reads %q (rest %v), want a pruned read and its rest", reads, rest)
	}
	full, err := st.SearchCandidates(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want := enricher.Rank(full, at, 0, 50)
	if len(want) == 0 || want[0].ID != moved {
		t.Fatalf("a full read's hits %+v, want the re-indexed item %d first", want, moved)
	}
	if !slices.ContainsFunc(got, func(it store.ContextItem) bool { return it.ID == moved }) {
		t.Fatalf("hits %v (reads %q) leave out item %d, a candidate before the change of language and after it; a full read's: %v",
			hitIDs(got), reads, moved, hitIDs(want))
	}
	if !slices.EqualFunc(got, want, func(a, b store.ContextItem) bool { return a.ID == b.ID && a.Score == b.Score }) {
		t.Fatalf("hits %v (reads %q), want a full read's after the change %v", hitIDs(got), reads, hitIDs(want))
	}
}

func hitIDs(items []store.ContextItem) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// readsBetween is a PrunedRead read function over st that records each
// read's kind in reads ("pruned", letting the test's small user be pruned;
// "rest"; "full") and calls between after the first read: the change a
// test makes between a pruned read and its rest.
func readsBetween(st *store.Store, reads *[]string, between func(context.Context, store.Candidates)) enricher.ReadFunc {
	return func(ctx context.Context, q store.SearchQuery) ([]store.Fact, store.Candidates, error) {
		kind := "full"
		switch {
		case len(q.Prune.Except) > 0:
			kind = "rest"
		case q.Prune.Share > 0:
			q.Prune.MinItems, kind = 0, "pruned"
		}
		*reads = append(*reads, kind)
		c, err := st.SearchCandidates(ctx, q)
		if err == nil && len(*reads) == 1 {
			between(ctx, c)
		}
		return nil, c, err
	}
}

// TestSmallUserReadPlainly: a user far under the fewest items for pruning
// is read with the pruned statement the first time enrich or search meets
// them (nothing is known of them yet), and with the plain one after, by
// both: the pruned statement prunes nothing for them and costs more. A
// scoped read (its statistics are the scope's) teaches nothing.
func TestSmallUserReadPlainly(t *testing.T) {
	t.Parallel()
	st := &pruneStore{Store: storetest.New(t), full: true}
	insertContext(t, st.Store, store.ContextWrite{UserID: "u", Question: "Where does my sister live?", Answer: "In Porto.", CreatedAt: time.Now()})
	insertContext(t, st.Store, store.ContextWrite{UserID: "v", Question: "Where does my sister live?", Answer: "In Lyon.", CreatedAt: time.Now()})
	h := start(t, st, nil)
	req := events.EnrichRequest{UserID: "u", Message: "where does my sister live?"}
	if r := enrich(t, h, req); len(r.Context) == 0 {
		t.Fatalf("enrich found nothing: %+v", r)
	}
	enrich(t, h, req)
	if _, err := h.client.Search(ctxT(t), events.SearchRequest{UserID: "u", Query: "sister"}); err != nil {
		t.Fatal(err)
	}
	if got, want := st.takeAsked(), []bool{true, false, false}; !slices.Equal(got, want) {
		t.Errorf("u's reads asked to prune %v, want %v", got, want)
	}
	// v's first reads are scoped (to a scope of none of v's items): v is
	// still unknown after them.
	for range 2 {
		enrich(t, h, events.EnrichRequest{UserID: "v", Message: "where does my sister live?", Scope: "work"})
	}
	enrich(t, h, events.EnrichRequest{UserID: "v", Message: "where does my sister live?"})
	if got, want := st.takeAsked(), []bool{true}; !slices.Equal(got, want) {
		t.Errorf("v's unscoped read asked to prune %v, want %v", got, want)
	}
}
