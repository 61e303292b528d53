package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/migrations"
	"github.com/memoryd/memoryd/store"
)

const (
	natsTurn  = "I set MaxAckPending on the ConsumerConfig to 1000"
	httpTurn  = "The getHTTPServer helper calls utf8Decode first"
	brandTurn = "My ÜberCool naïveBayes model runs on my iPhone"
	plural    = "Paste the URLs and IDs of the APIs here"
	linkTurn  = "See https://github.com/nats-io/nats.go/issues?q=is%3Aissue+is%3Aopen+label%3AJetStream"
)

// TestSearchFindsWordsOfCamelCaseNames: the words of a camelCase or
// PascalCase name are found by the words a message holds (migration 061).
// Postgres' parser kept "MaxAckPending" whole and a message is searched by
// its words in lower case, so "max ack pending" found nothing (a walk over
// Go modules' documentation). The name typed whole is still found, and a
// keyword the parser splits into a phrase ("max_ack_pending") is one of the
// parts. A plural of an acronym is one word: "ls" finds no "URLs".
func TestSearchFindsWordsOfCamelCaseNames(t *testing.T) {
	ctx, s := setup(t)
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: natsTurn, Answer: "noted", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "Which helper?", Answer: httpTurn, CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: brandTurn, Answer: "ok", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: plural, Answer: "done", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: linkTurn, Answer: "ok", CreatedAt: t0},
		store.ContextWrite{UserID: "bob", Question: natsTurn, Answer: "noted", CreatedAt: t0},
	)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"pending", []string{natsTurn}},
		{"ack", []string{natsTurn}},
		{"consumer", []string{natsTurn}},
		{"maxackpending", []string{natsTurn}},
		{"MaxAckPending", []string{natsTurn}},
		{"max_ack_pending", []string{natsTurn}},
		{"server", []string{"Which helper?"}},
		{"http", []string{"Which helper?"}},
		{"decode", []string{"Which helper?"}},
		{"gethttpserver", []string{"Which helper?"}},
		{"uber", []string{brandTurn}},
		{"cool", []string{brandTurn}},
		{"naive", []string{brandTurn}},
		{"bayes", []string{brandTurn}},
		{"phone", []string{brandTurn}},
		{"iphone", []string{brandTurn}},
		{"urls", []string{plural}},
		{"ls", nil},
		{"ds", nil},
		// A URL's escapes are no names: "%3Aissue" is not "3 Aissue".
		{"aissue", nil},
		{"aopen", nil},
		{"stream", []string{linkTurn}}, // JetStream after "%3A"
		// A phrase of the text itself is not broken by the parts after it.
		{"config_to", []string{natsTurn}},
		{"set_maxackpending", []string{natsTurn}},
	})
	if cols, terms := derivedDiffer(t, ctx, s); cols != 0 || terms != 0 {
		t.Fatalf("%d items' vectors differ from memoryd_tsvector's, %d term rows", cols, terms)
	}

	// Documents are indexed by the same function.
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "consumers.md",
		Content: "# Consumers\n\nSet `MaxAckPending` in `jetstream.ConsumerConfig` to bound redeliveries.\n"})
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "other.md",
		Content: "# Other\n\nNothing about acks here: the maximum is pending review.\n"})
	for _, kw := range [][]string{{"max", "ack", "pending"}, {"max_ack_pending"}, {"maxackpending"}} {
		c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: kw})
		if len(c.Matches) == 0 || c.Matches[0].Hit.Source != "consumers.md" {
			var got []string
			for _, m := range c.Matches {
				got = append(got, m.Hit.Source)
			}
			t.Errorf("documents: %q ranked %q, want consumers.md first", kw, got)
		}
	}
}

// TestMigration061ReindexesCamelCaseNames: the items and chunks indexed
// before migration 061 that hold a camelCase name get the vector, lengths
// and term rows with its parts when it runs; the others are not touched.
func TestMigration061ReindexesCamelCaseNames(t *testing.T) {
	ctx, s := setup(t)
	const plain = "Bought a shelf at IKEA"
	seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: natsTurn, Answer: "noted", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "Which helper?", Answer: httpTurn, CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: plain, Answer: "ok", CreatedAt: t0},
	)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", Source: "consumers.md",
		Content: "# Consumers\n\nSet MaxAckPending to bound redeliveries.\n"})
	// Index the items and chunks as before 061: NFKC (049), split (056),
	// folded (058), no parts.
	const before = "memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(%s))))"
	plantVectors(t, ctx, s, before, "")
	if _, err := s.Pool().Exec(ctx, `UPDATE doc_chunks SET
		search = setweight(to_tsvector(ts_config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(heading))))), 'A')
			|| setweight(to_tsvector(ts_config::regconfig, memoryd_cjk(memoryd_split(memoryd_fold(memoryd_nfkc(text))))), 'B')`); err != nil {
		t.Fatal(err)
	}
	for _, kw := range []string{"pending", "server"} {
		if got := matched(t, ctx, s, "alice", kw); got != nil {
			t.Fatalf("old vector found by %s: %q (the plant did not work)", kw, got)
		}
	}
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"pending"}}); len(c.Matches) != 0 {
		t.Fatalf("old chunk vector found by pending (the plant did not work)")
	}
	reindexAgain(t, ctx, s, "061_split_camel.sql", plain)
	checkSearches(t, ctx, s, "alice", []searchCase{
		{"pending", []string{natsTurn}},
		{"server", []string{"Which helper?"}},
		{"ikea", []string{plain}},
	})
	if c := search(t, ctx, s, store.ChunkQuery{Reader: alice, Keywords: []string{"pending"}}); len(c.Matches) != 1 {
		t.Errorf("after 061 the chunk is found by pending %d times, want once", len(c.Matches))
	}
	var stale int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM doc_chunks WHERE
		search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, heading), 'A') || setweight(memoryd_tsvector(ts_config, text), 'B')
		OR heading_len <> length(memoryd_tsvector_base(ts_config, heading)) OR text_len <> length(memoryd_tsvector_base(ts_config, text))`).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Errorf("after 061, %d chunks' vectors differ from memoryd_tsvector's", stale)
	}
}

// TestMigration061ReindexesAnOldItemRewrittenMeanwhile: an item older than
// ten minutes that a previous-release process rewrites while 061 runs, from
// text without a camelCase name to text with one, is indexed with its
// parts when the migration ends. 048 to 058 read again only the items
// inserted in the last 10 minutes: an upgrade walk saw 20 of 20 such
// context.updates keep the old vector. Here the previous release's write
// is a transaction with the vector trigger off (its indexing is planted,
// as plantVectors does), open while the migration's re-index reads the
// table and committed while its end waits for the table's lock.
func TestMigration061ReindexesAnOldItemRewrittenMeanwhile(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s, store.ContextWrite{UserID: "alice", Question: "Which queue setting did I change?", Answer: "the pending limit", CreatedAt: t0})
	if _, err := s.Pool().Exec(ctx, `UPDATE context SET inserted_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	old, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Rollback(ctx) }()
	for _, sql := range []string{
		`SET LOCAL session_replication_role = replica`, // no trigger: the previous release's indexing is planted
		`UPDATE context SET question = 'Did I set MaxAckPending?',
			search = setweight(to_tsvector(ts_config::regconfig, 'Did I set MaxAckPending?'), 'A') || setweight(to_tsvector(ts_config::regconfig, answer), 'B'),
			question_len = length(to_tsvector(ts_config::regconfig, 'Did I set MaxAckPending?')) WHERE id = $1`,
		`DELETE FROM context_terms WHERE item_id = $1`,
		`INSERT INTO context_terms (user_id, lexeme, item_id, question, answer)
			SELECT c.user_id, x.lexeme, c.id, x.question, x.answer FROM context c, memoryd_item_terms(c.search) x WHERE c.id = $1`,
	} {
		args := []any{}
		if sql[0] != 'S' {
			args = append(args, ids[0])
		}
		if _, err := old.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	body, err := migrations.FS.ReadFile("061_split_camel.sql")
	if err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	go func() {
		_, err := s.Pool().Exec(ctx, string(body))
		migrated <- err
	}()
	// The migration's end waits for the previous release's transaction:
	// old's backend (the database's other schemas run 061 too).
	var holder int
	if err := old.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting bool
		if err := s.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '-- The words of camelCase%')`, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-migrated:
			t.Fatalf("the migration ended (%v) before the rewrite committed: the test shows nothing", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration did not wait for the rewrite's transaction within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatal(err)
	}
	if cols, terms := derivedDiffer(t, ctx, s); cols != 0 || terms != 0 {
		t.Fatalf("after 061, %d items' vectors differ from memoryd_tsvector's, %d term rows: the item rewritten meanwhile kept the old vector", cols, terms)
	}
	checkSearches(t, ctx, s, "alice", []searchCase{{"ack", []string{"Did I set MaxAckPending?"}}})
}
