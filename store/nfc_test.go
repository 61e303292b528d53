package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

const (
	cafeNFC   = "Coffee at the caf\u00e9"
	kolnNFD   = "Ko\u0308ln: Mu\u0308ller's Cre\u0302pes"
	seoulJamo = "\u1109\u1165\u110b\u116e\u11af\u110b\u1166 \u1109\u1161\u11af\u110b\u1161\u110b\u116d" // 서울에 살아요, as Jamo
)

// TestSearchNFC: items are indexed, and keywords parsed, in Unicode NFC
// (migration 041), so text stored composed is found by a keyword typed
// decomposed and the reverse, Hangul as conjoining Jamo included; the
// stored text stays as it was sent.
func TestSearchNFC(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: cafeNFC, Answer: "Nice", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: kolnNFD, Answer: "Yum", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: seoulJamo, Answer: "", CreatedAt: t0},
	)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"caf\u00e9", []string{cafeNFC}},
		{"cafe\u0301", []string{cafeNFC}},
		{"k\u00f6ln", []string{kolnNFD}},
		{"ko\u0308ln", []string{kolnNFD}},
		{"m\u00fcller", []string{kolnNFD}},
		{"cr\u00eapes", []string{kolnNFD}},
		{"서울", []string{seoulJamo}},
	})
	var q string
	if err := s.Pool().QueryRow(ctx, `SELECT question FROM context WHERE user_id = 'alice' AND question LIKE 'Ko%'`).Scan(&q); err != nil || q != kolnNFD {
		t.Fatalf("stored question = %+q, %v; want it as sent", q, err)
	}
	// Chunks are indexed by the same function.
	var same bool
	if err := s.Pool().QueryRow(ctx, `SELECT memoryd_tsvector('english', $1) = memoryd_tsvector('english', normalize($1, NFC))`, kolnNFD).Scan(&same); err != nil || !same {
		t.Fatalf("memoryd_tsvector of NFD = of NFC: %v, %v", same, err)
	}
}

// TestMigration041ReindexesNonNFC: the items indexed before migration 041
// whose text is not NFC get the NFC vector, lengths and term rows when it
// runs; the others are not touched (no update, no memory change).
func TestMigration041ReindexesNonNFC(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: kolnNFD, Answer: "cafe\u0301", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: cafeNFC, Answer: "Nice", CreatedAt: t0},
	)
	// Index the items as before 041: without normalization.
	plantVectors(t, ctx, s, "memoryd_cjk(%s)", "")
	if got := matched(t, ctx, s, "alice", "k\u00f6ln"); got != nil {
		t.Fatalf("old NFD vector found by NFC: %q (the plant did not work)", got)
	}
	reindexAgain(t, ctx, s, "041_nfc.sql", cafeNFC)
	if got := matched(t, ctx, s, "alice", "k\u00f6ln"); !slices.Equal(got, []string{kolnNFD}) {
		t.Fatalf("after 041, NFC k\u00f6ln found %+q", got)
	}
	if got := matched(t, ctx, s, "alice", "caf\u00e9"); len(got) != 2 {
		t.Fatalf("after 041, caf\u00e9 found %+q, want both items", got)
	}
}

const (
	ikeaWide  = "ＩＫＥＡ港北で本棚を２つ買いました"           // full-width Latin letters and digit
	starbucks = "ｽﾀｰﾊﾞｯｸｽの新作がおいしかった"          // half-width katakana
	ligature  = "The \ufb01le is on the desk" // "ﬁle"
	plainIKEA = "Bought a shelf at IKEA"
)

// TestSearchNFKC: items are indexed, and keywords parsed, in Unicode NFKC
// (migration 049), so full-width Latin letters, half-width katakana and
// ligatures are found by their ordinary forms and the reverse.
func TestSearchNFKC(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: ikeaWide, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: starbucks, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: ligature, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: plainIKEA, Answer: "", CreatedAt: t0},
	)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"ikea", []string{plainIKEA, ikeaWide}},
		{"ＩＫＥＡ", []string{plainIKEA, ikeaWide}},
		{"スターバックス", []string{starbucks}},
		{"ｽﾀｰﾊﾞｯｸｽ", []string{starbucks}},
		{"file", []string{ligature}},
		{"本棚", []string{ikeaWide}},
	})
}

// TestMigration049ReindexesNFKC: the items indexed before migration 049
// whose NFKC form differs from their NFC form get the NFKC vector, lengths
// and term rows when it runs; the others are not touched.
func TestMigration049ReindexesNFKC(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: ikeaWide, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: cafeNFC, Answer: "Nice", CreatedAt: t0},
	)
	// Index the items as before 049: NFC (041).
	plantVectors(t, ctx, s, "memoryd_cjk(memoryd_nfc(%s))", "")

	if got := matched(t, ctx, s, "alice", "ikea"); got != nil {
		t.Fatalf("old NFC vector found by ikea: %q (the plant did not work)", got)
	}
	reindexAgain(t, ctx, s, "049_nfkc.sql", cafeNFC)
	if got := matched(t, ctx, s, "alice", "ikea"); !slices.Equal(got, []string{ikeaWide}) {
		t.Fatalf("after 049, ikea found %+q", got)
	}
}

// reindexAgain runs the re-indexing migration file again on s, as an
// upgrade would, and checks that it re-indexed without a trace: every
// item's vector, lengths and term rows are memoryd_tsvector's, no memory
// change was recorded, and the item whose question is untouched was not
// updated (its xmin is the same).
func reindexAgain(t *testing.T, ctx context.Context, s *store.Store, file, untouched string) {
	t.Helper()
	state := func() (changes int, xmin string) {
		t.Helper()
		if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM memory_changes), (SELECT xmin::text FROM context WHERE question = $1)`,
			untouched).Scan(&changes, &xmin); err != nil {
			t.Fatal(err)
		}
		return changes, xmin
	}
	changes0, xmin0 := state()
	body, err := migrations.FS.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Since 061 the vector trigger reads memoryd_tsvector_base (and adds
	// the parts of camelCase names): a migration before it, run again,
	// defines its function under that name, so that what it re-indexes
	// is its own indexing.
	if file < "061" {
		body = []byte(strings.ReplaceAll(string(body), "FUNCTION memoryd_tsvector(", "FUNCTION memoryd_tsvector_base("))
	}
	if _, err := s.Pool().Exec(ctx, string(body)); err != nil {
		t.Fatalf("run %s again: %v", file, err)
	}
	if cols, terms := derivedDiffer(t, ctx, s); cols != 0 || terms != 0 {
		t.Fatalf("after %s: %d items' vectors differ from memoryd_tsvector's, %d term rows", file, cols, terms)
	}
	changes, xmin := state()
	if changes != changes0 {
		t.Fatalf("%s recorded %d memory changes", file, changes-changes0)
	}
	if xmin != xmin0 {
		t.Fatalf("%s updated the item %q, which it does not change", file, untouched)
	}
}

// plantVectors writes the items' search vectors and lengths as an earlier
// release indexed them, norm being its expression of a text (%s) before
// to_tsvector, for the items whose question is only (or all, ""): the
// vector trigger is off while they are written; the term rows follow them
// (their own trigger stays on).
func plantVectors(t *testing.T, ctx context.Context, s *store.Store, norm, only string) {
	t.Helper()
	v := func(field string) string {
		return "to_tsvector(ts_config::regconfig, " + fmt.Sprintf(norm, field) + ")"
	}
	for _, sql := range []string{
		`ALTER TABLE context DISABLE TRIGGER context_tsvector_trg`,
		`UPDATE context SET search = setweight(` + v("question") + `, 'A') || setweight(` + v("answer") + `, 'B'),
			question_len = length(` + v("question") + `), answer_len = length(` + v("answer") + `)
			WHERE $1 = '' OR question = $1`,
		`ALTER TABLE context ENABLE TRIGGER context_tsvector_trg`,
	} {
		args := []any{}
		if strings.Contains(sql, "$1") {
			args = append(args, only)
		}
		if _, err := s.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// searchCase is a keyword and the questions of the items a search for it
// finds, sorted.
type searchCase struct {
	keyword string
	want    []string
}

// checkSearches searches user's items for each case's keyword.
func checkSearches(t *testing.T, ctx context.Context, s *store.Store, user string, cases []searchCase) {
	t.Helper()
	for _, c := range cases {
		if got := matched(t, ctx, s, user, c.keyword); !slices.Equal(got, c.want) {
			t.Errorf("search %+q = %+q, want %+q", c.keyword, got, c.want)
		}
	}
}
