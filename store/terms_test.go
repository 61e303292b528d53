package store_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// termsDiffer counts the rows where context_terms and the items' vectors
// (decoded in SQL, memoryd_item_terms) disagree, both ways.
func termsDiffer(t *testing.T, ctx context.Context, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM (
		(SELECT user_id, lexeme, item_id, question, answer FROM context_terms
		 EXCEPT ALL
		 SELECT c.user_id, x.lexeme, c.id, x.question, x.answer FROM context c, memoryd_item_terms(c.search) x)
		UNION ALL
		(SELECT c.user_id, x.lexeme, c.id, x.question, x.answer FROM context c, memoryd_item_terms(c.search) x
		 EXCEPT ALL
		 SELECT user_id, lexeme, item_id, question, answer FROM context_terms)) d`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStoredTermsFollowItems: the stored term counts (migrations/025) stay
// those of the items' vectors through every kind of write: insert, an
// update of the text, a change of language (which re-indexes), deletes by
// id and by user, and prune.
func TestStoredTermsFollowItems(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "Where does my dog sleep? dog dog", Answer: "Your dog sleeps in the kitchen; the dog's bed is blue.", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "What's O'Brien's phone?", Answer: `It's 555-0100 (a \backslash and 'quotes').`, CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "東京の天気は？", Answer: "晴れです", CreatedAt: t0},
		store.ContextWrite{UserID: "bob", Question: "Where does my dog sleep?", Answer: "On the sofa.", CreatedAt: t0},
		store.ContextWrite{UserID: "hans", Question: "Wo schläft mein Hund?", Answer: "Der Hund schläft in der Küche.", CreatedAt: t0},
	)
	var rows int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_terms`).Scan(&rows); err != nil || rows < 20 {
		t.Fatalf("context_terms holds %d rows after the inserts (err %v), want one per item and lexeme", rows, err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after insert: %d rows differ", n)
	}
	q, a := "Where does my cat sleep?", "The cat sleeps on the dog."
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[0], Question: &q, Answer: &a}); err != nil {
		t.Fatal(err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after update: %d rows differ", n)
	}
	if _, err := s.SetLanguage(ctx, "hans", "de", "german"); err != nil {
		t.Fatal(err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after a change of language: %d rows differ", n)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "alice", ID: ids[1]}); err != nil {
		t.Fatal(err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after delete by id: %d rows differ", n)
	}
	if _, err := s.DeleteContext(ctx, store.ContextDelete{UserID: "bob", All: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteContextOverCap(ctx, 1, 100); err != nil {
		t.Fatal(err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after delete all and prune: %d rows differ", n)
	}
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_terms WHERE user_id = 'bob'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("bob's items are gone but %d of their term rows are left (err %v)", rows, err)
	}
	// A forget deletes the user's terms in one range before the items.
	if _, _, err := s.ForgetUser(ctx, "hans", "hans", store.StreamPosition{}); err != nil {
		t.Fatal(err)
	}
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("after a forget: %d rows differ", n)
	}
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context_terms WHERE user_id = 'hans'`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("hans is forgotten but %d of their term rows are left (err %v)", rows, err)
	}
}

// TestRecallCandidatesMatchVectors: for queries with and without phrases,
// Recall's candidates (ids, lengths and term counts, from context_terms or
// from the vectors) are exactly the items matching the tsquery with the
// counts decoded from their vectors, as before migration 025.
func TestRecallCandidatesMatchVectors(t *testing.T) {
	ctx, s := setup(t)
	words := strings.Fields("dog cat kitchen sofa blue garden paris train coffee tea book music piano email e-mail o'brien")
	var items []store.ContextWrite
	for i := range 60 {
		q := words[i%len(words)] + " and " + words[(i*7)%len(words)] + "?"
		a := strings.Repeat(words[(i*3)%len(words)]+" ", 1+i%4) + words[(i*5)%len(words)] + " 東京の天気"[:1+i%2*15]
		items = append(items, store.ContextWrite{UserID: "u", Question: q, Answer: a, CreatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	seedContext(t, s, items...)
	texts := map[bool]int{}
	for _, kws := range [][]string{
		{"dog"}, {"dog", "kitchen", "piano"}, {"dogs", "cats", "unmatched"}, {"e-mail"}, {"東京の天気"},
		{"o'brien", "tea"}, {"the", "and"}, {"coffee", "東京"}, {"dog", "cat", "kitchen", "sofa", "blue", "garden", "paris", "train"},
	} {
		_, got, err := s.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "u", Keywords: kws}, MaxFacts: 1})
		if err != nil {
			t.Fatalf("%v: %v", kws, err)
		}
		// Texts: every candidate has its texts (few candidates), or none.
		texts[got.Texts]++
		for _, m := range got.Matches {
			if (m.Item.Question != "") != got.Texts {
				t.Fatalf("%v: Texts %v but candidate %d has question %q", kws, got.Texts, m.Item.ID, m.Item.Question)
			}
		}
		want := vectorCandidates(t, ctx, s, "u", kws, got.Terms)
		if len(got.Matches) != len(want) {
			t.Fatalf("%v: %d candidates, want %d", kws, len(got.Matches), len(want))
		}
		slices.SortFunc(got.Matches, func(x, y store.Candidate) int { return int(x.Item.ID - y.Item.ID) })
		for i, w := range want {
			g := got.Matches[i]
			if g.Item.ID != w.Item.ID || g.QuestionLen != w.QuestionLen || g.AnswerLen != w.AnswerLen || !slices.Equal(g.Terms, w.Terms) || !g.Item.CreatedAt.Equal(w.Item.CreatedAt) {
				t.Fatalf("%v: candidate %d = %+v, want %+v", kws, i, g, w)
			}
		}
	}
	if texts[true] == 0 || texts[false] == 0 {
		t.Fatalf("queries with texts / without: %d / %d; want both kinds (few and many candidates)", texts[true], texts[false])
	}
}

// vectorCandidates is what recall read before migration 025: the user's
// items matching the keywords' tsquery, with their vectors decoded in Go.
func vectorCandidates(t *testing.T, ctx context.Context, s *store.Store, user string, kws, terms []string) []store.Candidate {
	t.Helper()
	rows, err := s.Pool().Query(ctx, `SELECT id, created_at, question_len, answer_len, search::text FROM context
		WHERE user_id = $1 AND $2 <> '' AND search @@ memoryd_tsquery('english', $2) ORDER BY id`, user, store.TSQuery(kws))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var (
		cands []store.Candidate
		raw   [][5][]byte
	)
	for rows.Next() {
		var (
			c    store.Candidate
			v    string
			q, a int
		)
		if err := rows.Scan(&c.Item.ID, &c.Item.CreatedAt, &q, &a, &v); err != nil {
			t.Fatal(err)
		}
		c.QuestionLen, c.AnswerLen = q, a
		cands = append(cands, c)
		raw = append(raw, [5][]byte{nil, nil, nil, nil, []byte(v)})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return store.ReadCandidates(cands, raw, terms, user)
}

// TestReadStoredCounts: the packed int8[] recallSQL aggregates, in
// Postgres' binary format and in its text form, and malformed arrays
// refused rather than misread.
func TestReadStoredCounts(t *testing.T) {
	t.Parallel()
	pack := func(term, q, a int64) int64 { return term<<32 | q<<16 | a }
	bin := func(xs ...int64) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1) // dimensions
		b = binary.BigEndian.AppendUint32(b, 0)    // no nulls
		b = binary.BigEndian.AppendUint32(b, 20)   // int8
		b = binary.BigEndian.AppendUint32(b, uint32(len(xs)))
		b = binary.BigEndian.AppendUint32(b, 1) // lower bound
		for _, x := range xs {
			b = binary.BigEndian.AppendUint32(b, 8)
			b = binary.BigEndian.AppendUint64(b, uint64(x))
		}
		return b
	}
	want := []store.TermCount{{Present: true, Question: 1}, {}, {Present: true, Answer: 256}}
	for _, v := range [][]byte{bin(pack(3, 0, 256), pack(1, 1, 0)), []byte(fmt.Sprintf("{%d,%d}", pack(3, 0, 256), pack(1, 1, 0)))} {
		counts := make([]store.TermCount, 3)
		if err := store.ReadStoredCounts(v, counts); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if !slices.Equal(counts, want) {
			t.Fatalf("%q: counts = %+v, want %+v", v, counts, want)
		}
	}
	short := bin(pack(1, 1, 1))
	for _, bad := range [][]byte{
		bin(pack(0, 1, 1)), bin(pack(4, 1, 1)), bin(-1), short[:len(short)-1], short[:8],
		[]byte("{1,2"), []byte("{4294967297,}"), []byte("{x}"), []byte(fmt.Sprintf("{%d}", pack(4, 0, 0))),
	} {
		if err := store.ReadStoredCounts(bad, make([]store.TermCount, 3)); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}
