package store_test

import (
	"context"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// derivedDiffer counts the items whose search vector or field lengths are
// not what the generated columns of migration 020 computed from their text
// and configuration, and the rows where memoryd_item_terms differs from its
// definition of migration 025 (two subqueries a lexeme), both ways.
func derivedDiffer(t *testing.T, ctx context.Context, s *store.Store) (columns, terms int) {
	t.Helper()
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context
		WHERE search IS DISTINCT FROM setweight(memoryd_tsvector(ts_config, question), 'A') || setweight(memoryd_tsvector(ts_config, answer), 'B')
		   OR question_len IS DISTINCT FROM length(memoryd_tsvector_base(ts_config, question))
		   OR answer_len IS DISTINCT FROM length(memoryd_tsvector_base(ts_config, answer))`).Scan(&columns); err != nil {
		t.Fatal(err)
	}
	if err := s.Pool().QueryRow(ctx, `WITH v AS (SELECT search AS v FROM context UNION ALL SELECT strip(search) FROM context),
		now AS (SELECT x.* FROM v, memoryd_item_terms(v.v) x),
		was AS (SELECT u.lexeme,
			coalesce((SELECT count(*) FROM unnest(u.weights) w WHERE w = 'A'), 0)::smallint AS question,
			coalesce((SELECT count(*) FROM unnest(u.weights) w WHERE w <> 'A'), 0)::smallint AS answer
			FROM v, unnest(v.v) u)
		SELECT count(*) FROM ((SELECT * FROM now EXCEPT ALL SELECT * FROM was) UNION ALL (SELECT * FROM was EXCEPT ALL SELECT * FROM now)) d`).Scan(&terms); err != nil {
		t.Fatal(err)
	}
	return columns, terms
}

// TestSearchVectorFollowsText: since migration 031 an item's search vector
// and field lengths are set by a trigger from one parse of each text
// instead of generated columns; they stay exactly what the generated
// columns gave through an insert, a duplicate's upsert, an update of the
// text, a change of language and a direct write of the derived columns,
// and the faster memoryd_item_terms returns the rows of the one it
// replaced (stripped vectors included). A trigger that missed an update, or
// ran before the item's configuration was set, fails here.
func TestSearchVectorFollowsText(t *testing.T) {
	ctx, s := setup(t)
	ids := seedContext(t, s,
		store.ContextWrite{UserID: "alice", Question: "Where does my dog sleep? dog dog", Answer: "Your dog sleeps in the kitchen; the dog's bed is blue.", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "東京の天気は？", Answer: "晴れです", CreatedAt: t0},
		store.ContextWrite{UserID: "alice", Question: "Only a question", CreatedAt: t0},
		store.ContextWrite{UserID: "hans", Question: "Wo schläft mein Hund?", Answer: "Der Hund schläft in der Küche.", CreatedAt: t0},
	)
	check := func(after string) {
		t.Helper()
		var n int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM context WHERE search IS NULL OR question_len IS NULL OR answer_len IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("after %s: %d items without a vector or lengths", after, n)
		}
		if cols, terms := derivedDiffer(t, ctx, s); cols != 0 || terms != 0 {
			t.Fatalf("after %s: %d items' vector or lengths differ from the generated columns', %d term rows from the old memoryd_item_terms", after, cols, terms)
		}
	}
	check("insert")

	// The same pair again, later: the upsert moves created_at only.
	seedContext(t, s, store.ContextWrite{UserID: "alice", Question: "Where does my dog sleep? dog dog", Answer: "Your dog sleeps in the kitchen; the dog's bed is blue.", CreatedAt: t0.Add(1)})
	check("a duplicate's upsert")

	q, a := "Where does my cat sleep?", "The cat sleeps on the dog."
	if _, err := s.UpdateContext(ctx, store.ContextUpdate{UserID: "alice", ID: ids[0], Question: &q, Answer: &a}); err != nil {
		t.Fatal(err)
	}
	check("an update of the text")

	if _, err := s.SetLanguage(ctx, "hans", "de", "german"); err != nil {
		t.Fatal(err)
	}
	check("a change of language")
	var cfg string
	if err := s.Pool().QueryRow(ctx, `SELECT ts_config FROM context WHERE user_id = 'hans'`).Scan(&cfg); err != nil || cfg != "german" {
		t.Fatalf("hans's item is indexed under %q (err %v), want german", cfg, err)
	}

	if _, err := s.Pool().Exec(ctx, `UPDATE context SET search = ''::tsvector, question_len = 0, answer_len = 0 WHERE id = $1`, ids[3]); err != nil {
		t.Fatal(err)
	}
	check("a direct write of the derived columns")
	if n := termsDiffer(t, ctx, s); n != 0 {
		t.Fatalf("context_terms: %d rows differ from the items' vectors", n)
	}
}
