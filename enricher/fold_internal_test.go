package enricher

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestFoldWord: the walk's pairs fold alike, Vietnamese words with a mark
// only Vietnamese writes keep theirs, and other scripts are untouched.
func TestFoldWord(t *testing.T) {
	for in, want := range map[string]string{
		"pokémon": "pokemon", "café": "cafe", "cafe\u0301": "cafe", "josé": "jose", "são": "sao",
		"crème": "creme", "brûlée": "brulee", "málaga": "malaga", "résumé": "resume",
		"łódź": "lodz", "søren": "soren", "straße": "strasse", "cœur": "coeur", "æble": "aeble",
		"ılık": "ilik", "i\u0307stanbul": "istanbul", "çağ": "cag", "žluťoučký": "zlutoucky",
		"bạn": "bạn", "phở": "phở", "mẹ": "mẹ", "bố": "bố", "người": "người", "bán": "ban", "đi": "đi",
		"서울": "서울", "が": "が", "йога": "йога", "άλφα": "άλφα", "ข้าว": "ข้าว", "hello": "hello",
	} {
		if got := foldWord(in); got != want {
			t.Errorf("foldWord(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFoldMatchesPostgres: foldWord folds a word as the index's
// memoryd_fold (migration 058) folds it, over every character of the
// blocks they fold (alone, in a word, after a Vietnamese mark), the
// combining marks on a Latin letter, and words of other scripts.
func TestFoldMatchesPostgres(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	words := []string{"pokémon", "crème", "brûlée", "bạn", "phở", "người", "đi", "cũng", "ấn", "a\u0301\u0301",
		"x\u0301", "1\u0301", "\u0301a", "ǿ", "ǽ", "ẞ", "서울café", "か\u3099", "й", "ά", "ข้าว", "n\u0303\u0323"}
	for _, block := range [][2]rune{{0xc0, 0x24f}, {0x1e00, 0x1eff}} {
		for r := block[0]; r <= block[1]; r++ {
			c := string(r)
			words = append(words, c, "a"+c+"b", "ạ"+c, c+"9")
		}
	}
	for r := rune(0x300); r <= 0x36f; r++ {
		c := string(r)
		words = append(words, "e"+c, "e"+c+"x", "ơ"+"e"+c, "и"+c)
	}
	got := callSQL(t, s, "memoryd_fold", words)
	for i, w := range words {
		if want := foldWord(w); got[i] != want {
			t.Errorf("memoryd_fold(%+q) = %+q, foldWord gives %+q", w, got[i], want)
		}
	}
}

// TestSelectFactsFoldsInCJKWord: a fact's Latin word written against CJK
// text ("Pokémonセンター", one word split by cjkPieces) is folded as the
// message's keywords are, so "pokémon" and "pokemon" both select it.
func TestSelectFactsFoldsInCJKWord(t *testing.T) {
	t.Parallel()
	facts := []store.Fact{{Key: "favorite_shop", Value: "Pokémonセンター"}, {Key: "pet", Value: "猫のミケ"}}
	for _, msg := range []string{"pokémonの新作は？", "pokemonの新作は？", "What about Pokémon?", "what about pokemon?"} {
		var got []string
		for _, f := range selectFacts(events.FactsRelevant, Keywords(msg), facts) {
			got = append(got, f.Key)
		}
		if !slices.Equal(got, []string{"favorite_shop"}) {
			t.Errorf("facts for %q = %q, want [favorite_shop]", msg, got)
		}
	}
}

// TestFoldLongText: memoryd_fold reads a long accented text in time
// linear in its length: an answer of the 256 KiB a pair may hold (French,
// an accent every few words) is indexed within seconds. With a lookbehind
// and a lookahead over the word at each mark it was quadratic: 2.6 s for
// 64 KiB, about 40 s for 256 KiB, in the write's transaction.
func TestFoldLongText(t *testing.T) {
	t.Parallel()
	s := storetest.New(t)
	ctx := context.Background()
	text := strings.Repeat("Le café était très réputé à Paris. ", events.MaxAnswerBytes/42)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = '10s'`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT length(memoryd_tsvector('english', $1))`, text).Scan(&n); err != nil {
		t.Fatalf("indexing %d bytes of accented text: %v", len(text), err)
	}
	var folded string
	if err := tx.QueryRow(ctx, `SELECT memoryd_fold($1)`, text).Scan(&folded); err != nil {
		t.Fatal(err)
	}
	if want := foldWord(text); folded != want {
		t.Errorf("memoryd_fold of the long text differs from foldWord's")
	}
}
