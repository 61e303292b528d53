package store_test

import (
	"testing"

	"github.com/memoryd/memoryd/store"
)

const (
	codeTurn = "I debug with fmt.Errorf and use github.com/klauspost/compress in ~/src/app/main.go"
	webTurn  = "My frontend uses Vue.js on Node.js with socket.io; mail bob@example.com, notes in C:\\Users\\bob\\todo.txt"
	prose    = "We met at 10 a.m. and left. Next week again"
)

// TestSearchFindsWordsOfDottedNames: the words of a dotted name, a path,
// an address or a URL are found by the words a message holds (migration
// 056). Postgres' parser kept "fmt.Errorf", "github.com/klauspost/compress"
// and "node.js" whole, and a message is searched by its words, so none of
// these searches found anything (a TypeScript frontend walk). A keyword
// written dotted is split alike.
func TestSearchFindsWordsOfDottedNames(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: codeTurn, Answer: "ok", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: webTurn, Answer: "noted", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: prose, Answer: "fine", CreatedAt: t0},
	)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"errorf", []string{codeTurn}},
		{"klauspost", []string{codeTurn}},
		{"compress", []string{codeTurn}},
		{"github", []string{codeTurn}},
		{"src", []string{codeTurn}},
		{"fmt.Errorf", []string{codeTurn}},
		{"node", []string{webTurn}},
		{"socket", []string{webTurn}},
		{"example", []string{webTurn}},
		{"todo", []string{webTurn}},
		{"users", []string{webTurn}},
		{"next", []string{prose}},
	})
	// Documents are indexed by the same function.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "tls.md",
		Content: "# TLS\n\nnc, err = nats.Connect(\"tls://localhost:4443\", nats.RootCAs(\"./configs/certs/ca.pem\"))\n"})
	for _, kw := range []string{"connect", "rootcas", "certs"} {
		c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{kw}})
		if len(c.Matches) != 1 {
			t.Errorf("documents: %q matched %d chunks, want the TLS one", kw, len(c.Matches))
		}
	}
}

// TestMigration056ReindexesDottedNames: the items indexed before migration
// 056 that hold a dotted name get the split vector, lengths and term rows
// when it runs; the others are not touched. So do those whose run is
// written with full-width punctuation (Chinese and Japanese input:
// "www．example．cn", "／home／bob", "bob＠example．org"), since the index
// reads text in NFKC, where "．" is "."; the first filter looked for ASCII
// runs only (a rolling-upgrade walk).
func TestMigration056ReindexesDottedNames(t *testing.T) {
	ctx, s := setup(t)
	const wide = "网站 www．example．cn，路径 ／home／bob／notes"
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: codeTurn, Answer: "", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: wide, Answer: "mail bob＠corp．org", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: cafeNFC, Answer: "Nice", CreatedAt: t0},
	)
	// Index the items as before 056: NFKC (049), nothing split.
	plantVectors(t, ctx, s, "memoryd_cjk(memoryd_nfkc(%s))", "")
	for _, kw := range []string{"klauspost", "example"} {
		if got := matched(t, ctx, s, "alice", kw); got != nil {
			t.Fatalf("old vector found by %s: %q (the plant did not work)", kw, got)
		}
	}
	reindexAgain(t, ctx, s, "056_split_dotted.sql", cafeNFC)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"klauspost", []string{codeTurn}},
		{"example", []string{wide}},
		{"home", []string{wide}},
		{"notes", []string{wide}},
		{"corp", []string{wide}},
	})
}
