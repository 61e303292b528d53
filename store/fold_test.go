package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// foldPairs are a text said with accents and the same said without, each
// with the words a search types (migration 058).
var foldPairs = []struct{ accented, bare string }{
	{"I'm playing Pokémon Sword", "I'm playing Pokemon Sword"},
	{"Coffee at the café", "Coffee at the cafe"},
	{"José called me", "Jose called me"},
	{"Flying to São Paulo", "Flying to Sao Paulo"},
	{"We had crème brûlée", "We had creme brulee"},
	{"A week in Málaga", "A week in Malaga"},
	{"Sent my résumé", "Sent my resume"},
}

// words are the search words of text: its words of three letters or more,
// as enricher.Keywords would keep them (apart from its stop words).
func foldWords(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r == ' ' || r == '\'' }) {
		if len([]rune(w)) > 2 && !slices.Contains([]string{"playing", "called", "flying", "had", "week", "sent", "coffee", "the", "at"}, w) {
			out = append(out, w)
		}
	}
	return out
}

// TestSearchFoldsAccents: a search typed without accents finds what was
// said with them, and the reverse (migration 058): "which pokemon game
// was i playing?" did not find "Pokémon Sword" (a search walk). Under
// English (stemmed) and under simple, for items and document chunks.
func TestSearchFoldsAccents(t *testing.T) {
	ctx, s := setup(t)
	if _, err := s.SetLanguage(ctx, "yuki", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "yuki"} {
		for _, p := range foldPairs {
			seedContext(t, s,
				store.ContextWrite{UserID: user + "-accented", Question: p.accented, Answer: "ok", CreatedAt: t0},
				store.ContextWrite{UserID: user + "-bare", Question: p.bare, Answer: "ok", CreatedAt: t0})
		}
	}
	if _, err := s.SetLanguage(ctx, "yuki-accented", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetLanguage(ctx, "yuki-bare", "ja", "simple"); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "yuki"} {
		for _, p := range foldPairs {
			// Each word alone, and all together.
			for _, kw := range append(foldWords(p.bare), strings.Join(foldWords(p.bare), " ")) {
				if got := matched(t, ctx, s, user+"-accented", strings.Fields(kw)...); !slices.Equal(got, []string{p.accented}) {
					t.Errorf("%s: %q found %q, want %q", user, kw, got, p.accented)
				}
			}
			for _, kw := range append(foldWords(p.accented), strings.Join(foldWords(p.accented), " ")) {
				if got := matched(t, ctx, s, user+"-bare", strings.Fields(kw)...); !slices.Equal(got, []string{p.bare}) {
					t.Errorf("%s: %q found %q, want %q", user, kw, got, p.bare)
				}
			}
		}
	}
	// A keyword typed decomposed folds too, and a phrase (a keyword the
	// parser splits) matches across the fold.
	checkSearches(t, ctx, s, "alice-bare", []searchCase{
		{"pokémon", []string{"I'm playing Pokemon Sword"}},
		{"cre\u0300me", []string{"We had creme brulee"}},
		{"São Paulo", []string{"Flying to Sao Paulo"}},
	})
	// Documents are indexed and searched by the same functions.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "trip.md",
		Content: "# Málaga\n\nThe crème brûlée near the café in São Paulo.\n"})
	for _, kw := range []string{"malaga", "creme", "brulee", "cafe", "sao", "café"} {
		c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{kw}})
		if len(c.Matches) != 1 {
			t.Errorf("documents: %q matched %d chunks, want the trip one", kw, len(c.Matches))
		}
	}
}

// TestFoldKeepsOtherScripts: text without a Latin accent is indexed
// exactly as before migration 058 (Korean, whose syllables NFD decomposes,
// Japanese with dakuten, Chinese, Thai, Cyrillic and Greek with their
// marks), and so are Vietnamese words holding a mark only Vietnamese
// writes; beside a folded Latin word, the rest of a text is as before.
func TestFoldKeepsOtherScripts(t *testing.T) {
	ctx, s := setup(t)
	const before = "to_tsvector(%s::regconfig, memoryd_cjk(memoryd_split(memoryd_nfkc(%s))))"
	for _, text := range []string{
		"서울에 살아요. 제 취미가 뭐예요?", "\u1109\u1165\u110b\u116e\u11af", "がぎぐげご、パン屋でコーヒーを買った",
		"今天的天气很好，我们去公园吧", "ฉันชอบกินข้าวผัดมาก", "ເຂົ້າໜຽວ", "Йошкар-Ола и ёлка", "Καλημέρα, ΐ",
		"bạn của phở, mẹ bố người Việt", "Hello world 3.14 fmt.Errorf",
	} {
		for _, cfg := range []string{"english", "simple"} {
			var same bool
			var got, want string
			if err := s.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT memoryd_tsvector($1, $2) = `+before+`, memoryd_tsvector($1, $2)::text, `+before+`::text`,
				"$1", "$2", "$1", "$2"), cfg, text).Scan(&same, &got, &want); err != nil {
				t.Fatal(err)
			}
			if !same {
				t.Errorf("%s %q: indexed %s, before 058 %s", cfg, text, got, want)
			}
		}
	}
	// Mixed: the Korean and Japanese parts are as before, the Latin folded.
	for text, want := range map[string]string{
		"서울 카페 café":    "서울 카페 cafe",
		"東京のカフェ Café":   "東京のカフェ Cafe",
		"ข้าวผัด crème": "ข้าวผัด creme",
		// Vietnamese: a word with a horn, a dot below, a hook above or
		// two marks keeps its accents; the others fold.
		"bạn của tôi thích phở và bố": "bạn của toi thich phở va bố",
	} {
		var same bool
		if err := s.Pool().QueryRow(ctx, `SELECT memoryd_tsvector('simple', $1) = memoryd_tsvector('simple', $2)`, text, want).Scan(&same); err != nil || !same {
			t.Errorf("%q is not indexed as %q: %v", text, want, err)
		}
	}
}

// TestMigration058ReindexesAccents: the items indexed before migration 058
// that hold a Latin accent get the folded vector, lengths and term rows
// when it runs; the others are not touched.
func TestMigration058ReindexesAccents(t *testing.T) {
	ctx, s := setup(t)
	const plain = "Bought a shelf at IKEA"
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: foldPairs[0].accented, Answer: "Nice", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "Trip", Answer: "A week in M\u00e1laga", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: plain, Answer: "ok", CreatedAt: t0},
	)
	// Index the items as before 058: NFKC (049), split (056), no fold.
	plantVectors(t, ctx, s, "memoryd_cjk(memoryd_split(memoryd_nfkc(%s)))", "")
	for _, kw := range []string{"pokemon", "malaga"} {
		if got := matched(t, ctx, s, "alice", kw); got != nil {
			t.Fatalf("old vector found by %s: %q (the plant did not work)", kw, got)
		}
	}
	reindexAgain(t, ctx, s, "058_fold_accents.sql", plain)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"pokemon", []string{foldPairs[0].accented}},
		{"malaga", []string{"Trip"}},
		{"ikea", []string{plain}},
	})
}
