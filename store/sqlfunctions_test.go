package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/memoryd/memoryd/store"
)

// indexingTexts take every branch of what indexes a text: plain English,
// Latin accents (memoryd_fold_words), a Vietnamese word that keeps them,
// camelCase names (memoryd_camel_words) and a URL escape, dotted names
// and paths (memoryd_split), Chinese, Japanese and Korean runs (CJK
// bigrams), Thai and Khmer (letters with their marks), full-width letters
// and a ligature (NFKC), decomposed accents (NFD input).
var indexingTexts = []string{
	"We had dinner at the little Italian place near the station",
	"I'm playing Pokémon Sword at the café in São Paulo with José",
	"Đà Nẵng has the best bánh mì, said my mẹ",
	"Set MaxAckPending on the HTTPServer; see https://github.com/x?q=is%3Aissue",
	"fmt.Errorf wraps errors; docs/setup.md and bob@example.com and C:\\Users\\bob",
	"東京の天気はどうですか 北京烤鸭 서울에서 만나요",
	"ฉันชอบกินข้าวผัดมาก ខ្ញុំចូលចិត្តបាយ",
	"ＩＫＥＡ港北で本棚を買った ｽﾀｰﾊﾞｯｸｽ ﬁle",
	"cafe\u0301 and re\u0301sume\u0301",
}

// TestIndexingAndSearchingPlanNoSQLFunctionPerTransaction: storing context
// items and a document (the insert triggers' vectors, lengths and term
// rows) and searching them (a recall, a document search) run no LANGUAGE
// sql function of memoryd's through Postgres' SQL function executor, which
// parses and plans the function's body again in every transaction, and
// the body of a function it calls in every call (migration 071): each is
// inlined into the statement that calls it, or is PL/pgSQL, whose plans a
// session keeps. A SQL function that is run, not inlined, is counted by
// track_functions; one that is inlined is not called at all.
func TestIndexingAndSearchingPlanNoSQLFunctionPerTransaction(t *testing.T) {
	ctx, s := setup(t)
	var items []store.ContextWrite
	for i, text := range indexingTexts {
		items = append(items, store.ContextWrite{UserID: "alice", Question: text, Answer: indexingTexts[(i+1)%len(indexingTexts)], CreatedAt: t0})
	}
	var called map[string]int64
	err := s.InTx(ctx, func(tx pgx.Tx, q *store.Store) error {
		if _, err := tx.Exec(ctx, `SET LOCAL track_functions = 'all'`); err != nil {
			return err
		}
		if _, err := q.InsertContext(ctx, items); err != nil {
			return err
		}
		if _, err := q.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "kb", Source: "notes.md", Chunk: chunkWith,
			Content: "# Notes\n\n" + strings.Join(indexingTexts, "\n\n") + "\n"}); err != nil {
			return err
		}
		for _, kw := range [][]string{{"pokemon", "cafe"}, {"MaxAckPending", "errorf"}, {"東京", "ข้าวผัด"}, {"IKEA"}} {
			if _, _, err := q.Recall(ctx, store.RecallQuery{SearchQuery: store.SearchQuery{UserID: "alice", Keywords: kw}, MaxFacts: 5}); err != nil {
				return err
			}
			if _, err := searchAll(ctx, q, store.ChunkQuery{Reader: alice, Keywords: kw}); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT p.proname, l.lanname, pg_stat_get_xact_function_calls(p.oid)
			FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
			WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'memoryd\_%'
			  AND pg_stat_get_xact_function_calls(p.oid) > 0`)
		if err != nil {
			return err
		}
		called = map[string]int64{}
		var name, lang string
		var n int64
		_, err = pgx.ForEachRow(rows, []any{&name, &lang, &n}, func() error {
			called[lang+" "+name] = n
			return nil
		})
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		t.Skip("track_functions needs a superuser:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The vector trigger is PL/pgSQL: counted, so the counting works.
	if called["plpgsql memoryd_context_search"] == 0 {
		t.Fatalf("memoryd_context_search not counted (track_functions off?): %v", called)
	}
	var bad []string
	for fn, n := range called {
		if name, ok := strings.CutPrefix(fn, "sql "); ok {
			bad = append(bad, fmt.Sprintf("%s (%d calls)", name, n))
		}
	}
	if len(bad) > 0 {
		t.Errorf("SQL functions run by the SQL function executor, their bodies planned in every transaction: %s", strings.Join(bad, ", "))
	}
}
