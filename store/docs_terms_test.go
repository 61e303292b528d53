package store_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestChunkCandidatesMatchVectors: for queries with and without phrases,
// over collections of two text search configurations, a chunk search's
// candidates (chunks, lengths and term counts, from chunk_terms or from the
// vectors) are exactly those read from the chunks' vectors, as before
// migration 027.
func TestChunkCandidatesMatchVectors(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "bob", "fr", "french"); err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("dog cat kitchen sofa blue garden paris train coffee tea book music piano email e-mail o'brien chats jardin")
	doc := func(seed int) string {
		var b strings.Builder
		for i := range 12 {
			j := seed + i
			fmt.Fprintf(&b, "# %s guide\n\n## %s and %s\n\n", words[j%len(words)], words[(j*7)%len(words)], words[(j*3)%len(words)])
			fmt.Fprintf(&b, "%s %s. The %s is near the %s 東京の天気%s.\n\n", strings.Repeat(words[(j*5)%len(words)]+" ", 1+j%4),
				words[(j*11)%len(words)], words[(j*13)%len(words)], words[(j*2)%len(words)], strings.Repeat(" again", j%3))
		}
		return b.String()
	}
	team := store.Owner{Shared: "team"}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "a", DocID: "d1", Content: doc(0), ChunkTokens: 40, OverlapTokens: 5})
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "a", DocID: "d2", Content: doc(5), ChunkTokens: 40, OverlapTokens: 5})
	put(t, ctx, s, store.DocumentPut{Owner: team, Collection: "h", DocID: "d3", Content: doc(9), ChunkTokens: 60})
	put(t, ctx, s, store.DocumentPut{Owner: store.Owner{User: "bob"}, Collection: "fr", DocID: "d4", Content: doc(2), ChunkTokens: 40})
	// A replaced and a deleted document leave no rows of their old chunks.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "a", DocID: "d2", Content: doc(7), ChunkTokens: 40, OverlapTokens: 5})
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "a", DocID: "gone", Content: doc(3)})
	if ok, err := s.DeleteDocument(ctx, alice, "a", "gone"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := s.GrantReader(ctx, "team", u); err != nil {
			t.Fatal(err)
		}
	}
	checkChunkTerms(t, s)
	for _, reader := range []store.Owner{alice, {User: "bob"}, team} {
		for _, kws := range [][]string{
			{"dog"}, {"dog", "kitchen", "piano"}, {"dogs", "cats", "unmatched"}, {"e-mail"}, {"東京の天気"},
			{"o'brien", "tea"}, {"the", "and"}, {"coffee", "東京"}, {"guide"}, {"chats", "jardin", "gardens"}, {"pianos"}, {"teas", "musical"},
			{"dog", "cat", "kitchen", "sofa", "blue", "garden", "paris", "train"}, {"nothing"},
		} {
			q := store.ChunkQuery{Reader: reader, Keywords: kws}
			got, err := searchAll(ctx, s, q)
			if err != nil {
				t.Fatalf("%v %v: %v", reader, kws, err)
			}
			want, err := searchAll(store.WithChunkVectors(ctx), s, q)
			if err != nil {
				t.Fatalf("%v %v from vectors: %v", reader, kws, err)
			}
			if !slices.Equal(got.Terms, want.Terms) || got.Stats != want.Stats {
				t.Fatalf("%v %v: terms %q stats %+v, want %q %+v", reader, kws, got.Terms, got.Stats, want.Terms, want.Stats)
			}
			if len(got.Matches) != len(want.Matches) {
				t.Fatalf("%v %v: %d candidates, want %d", reader, kws, len(got.Matches), len(want.Matches))
			}
			order := func(x, y store.ChunkCandidate) int {
				return cmp.Or(strings.Compare(x.Hit.Collection, y.Hit.Collection), strings.Compare(x.Hit.DocumentID, y.Hit.DocumentID),
					x.Hit.ChunkIndex-y.Hit.ChunkIndex)
			}
			slices.SortFunc(got.Matches, order)
			slices.SortFunc(want.Matches, order)
			for i, w := range want.Matches {
				g := got.Matches[i]
				if g.Hit.Collection != w.Hit.Collection || g.Hit.DocumentID != w.Hit.DocumentID || g.Hit.ChunkIndex != w.Hit.ChunkIndex ||
					g.Hit.Source != w.Hit.Source || !slices.Equal(g.Hit.HeadingPath, w.Hit.HeadingPath) || g.Hit.Start != w.Hit.Start ||
					g.Hit.End != w.Hit.End || g.Hit.Text != w.Hit.Text || g.HeadingLen != w.HeadingLen || g.TextLen != w.TextLen ||
					!slices.Equal(g.Terms, w.Terms) {
					t.Fatalf("%v %v: candidate %d = %+v, want %+v", reader, kws, i, g, w)
				}
			}
			t.Logf("%v %v: %d candidates", reader, kws, len(got.Matches))
		}
	}
	// Forget of a user takes the rows of the user's chunks (by cascade).
	if _, err := s.DeleteCollections(ctx, alice); err != nil {
		t.Fatal(err)
	}
	checkChunkTerms(t, s)
}

// checkChunkTerms checks that chunk_terms holds exactly the rows of the
// chunks' vectors, and some.
func checkChunkTerms(t *testing.T, s *store.Store) {
	t.Helper()
	var rows, extra, missing int
	if err := s.Pool().QueryRow(t.Context(), `
		WITH want AS (SELECT ch.collection_id, t.lexeme, ch.id AS chunk_id, t.question AS heading, t.answer AS body
			FROM doc_chunks ch, memoryd_item_terms(ch.search) t)
		SELECT (SELECT count(*) FROM chunk_terms),
			(SELECT count(*) FROM (SELECT * FROM chunk_terms EXCEPT ALL SELECT * FROM want) x),
			(SELECT count(*) FROM (SELECT * FROM want EXCEPT ALL SELECT * FROM chunk_terms) x)`).Scan(&rows, &extra, &missing); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || extra != 0 || missing != 0 {
		t.Fatalf("chunk_terms: %d rows, %d not of a chunk's vector, %d of the vectors missing", rows, extra, missing)
	}
}
