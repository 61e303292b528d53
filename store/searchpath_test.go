package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store/storetest"
)

// TestIndexingFunctionsFollowTheSessionsSearchPath: one session that
// indexes and searches in two memoryd schemas in turn (a test
// connection reused across schemas, a database holding several
// deployments) gets each schema's own functions, never the plans that
// PL/pgSQL (migration 071) and the session's prepared statements cached
// for the other schema. Schema b's memoryd_cjk is made to add a word, so
// that a plan resolved in a shows in b's results and the reverse; plans
// are forced generic and each schema is called past Postgres' five
// custom plans.
func TestIndexingFunctionsFollowTheSessionsSearchPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, urlA := storetest.Schema(t)
	b, urlB := storetest.Schema(t)
	storetest.Open(t, urlA)
	sb := storetest.Open(t, urlB)
	if _, err := sb.Pool().Exec(ctx, `CREATE OR REPLACE FUNCTION memoryd_cjk(t text) RETURNS text
		LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT t || ' | zebra' $$`); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	for round := range 8 {
		for _, schema := range []string{a, b} {
			if _, err := conn.Exec(ctx, "SET search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			question := fmt.Sprintf("hello world %s %d", schema, round)
			if _, err := conn.Exec(ctx, `INSERT INTO context (user_id, question, answer, created_at, content_hash)
				VALUES ('alice', $1, 'fine', now(), sha256(convert_to($1, 'UTF8')))`, question); err != nil {
				t.Fatal(err)
			}
			var text, vector, stored, query string
			var terms []string
			if err := conn.QueryRow(ctx, `SELECT memoryd_search_text($1), memoryd_tsvector('english', $1)::text,
				(SELECT search::text FROM context WHERE question = $2), memoryd_tsquery('english', $1)::text, memoryd_query_terms('english', $1)`,
				"hello", question).Scan(&text, &vector, &stored, &query, &terms); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{"memoryd_search_text": strings.Contains(text, "zebra"), "memoryd_tsvector": strings.Contains(vector, "zebra"),
				"the stored item's vector": strings.Contains(stored, "zebra"), "memoryd_tsquery": strings.Contains(query, "zebra"),
				"memoryd_query_terms": strings.Contains(strings.Join(terms, " "), "zebra")}
			for what, zebra := range got {
				if zebra != (schema == b) {
					t.Errorf("round %d, search_path %s: %s used the other schema's functions (zebra: %v): %q %q %q %q %q", round, schema, what, zebra, text, vector, stored, query, terms)
				}
			}
		}
	}
}
