package ranking_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/ranking"
	"github.com/memoryd/memoryd/store"
)

// oracleSQL is the search scoring written out in SQL, the way memoryd ranked
// before the ranking moved into Go: every candidate's tsvector unnested and
// BM25F summed by the database. TestSearchMatchesSQLOracle checks that the
// store's candidates (their term counts decoded from the tsvectors' text)
// ranked by this package give the same items in the same order with the
// same scores, so the quality figures measured on this formula
// (docs/quality.md) still hold. It lives here, a test with the store as a
// test-only dependency, because it checks the ranking; the store's own tests
// check the decoding against tables.
var oracleSQL = fmt.Sprintf(`
	WITH kw AS MATERIALIZED (
		SELECT memoryd_tsquery('english', $2) AS q, memoryd_query_terms('english', $6) AS terms
	), cand AS MATERIALIZED (
		SELECT c.id, c.created_at, c.search, c.question_len, c.answer_len
		FROM context c, kw WHERE c.user_id = $1 AND c.search @@ kw.q
	), coll AS (
		SELECT count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq, greatest(avg(answer_len), 1)::float8 AS avga
		FROM context WHERE user_id = $1
	), tf AS (
		SELECT cand.id, t.lexeme,
			(SELECT count(*) FILTER (WHERE w = 'A') / (1 - %[2]g + %[2]g * cand.question_len / coll.avgq)
				+ %[3]g * count(*) FILTER (WHERE w <> 'A') / (1 - %[2]g + %[2]g * cand.answer_len / coll.avga)
			 FROM unnest(t.weights) w)::float8 AS f
		FROM cand, kw, coll, unnest(cand.search) t
		WHERE t.lexeme = ANY (kw.terms)
	), idf AS (
		SELECT tf.lexeme, ln(1 + (coll.n + %[4]g - count(*) + 0.5) / (count(*) + 0.5)) AS idf
		FROM tf, coll GROUP BY tf.lexeme, coll.n
	), bm AS (
		SELECT tf.id, sum(idf.idf * tf.f * (%[1]g + 1) / (tf.f + %[1]g)) AS s
		FROM tf JOIN idf USING (lexeme) GROUP BY tf.id
	), scored AS (
		SELECT cand.id, cand.created_at,
			bm.s / (bm.s + %[5]g)
			* (1 - %[6]g + %[6]g / (1 + greatest(extract(epoch FROM ($3::timestamptz - cand.created_at)), 0) / %[7]g)) AS score
		FROM cand JOIN bm USING (id)
	)
	SELECT id, score::float8 FROM scored WHERE score >= $4
	ORDER BY score DESC, created_at DESC, id DESC LIMIT $5`,
	ranking.K1, ranking.B, ranking.AnswerWeight, ranking.IDFPrior, ranking.RelevanceHalf, ranking.RecencyWeight, ranking.RecencyDays*86400)

func TestSearchMatchesSQLOracle(t *testing.T) {
	ctx, s := setup(t)
	rng := rand.New(rand.NewPCG(6, 6))
	// A small vocabulary so that words repeat within and across items, with
	// words the tsvector text form escapes, stems and stop words.
	vocab := strings.Fields(`dog dogs cat paris guitar lesson lessons sister porto park walk walked
		it's a\b o'neill café 日本語 the and server index deploy deploying rex blue red green`)
	sentence := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(w, " ")
	}
	users := []string{"u1", "u2", "u3"}
	var writes []store.ContextWrite
	for i := range 240 {
		writes = append(writes, store.ContextWrite{
			UserID:    users[i%len(users)],
			Question:  sentence(1 + rng.IntN(8)),
			Answer:    sentence(rng.IntN(20)),
			CreatedAt: t0.Add(-time.Duration(rng.IntN(400*24)) * time.Hour),
			EventID:   fmt.Sprintf("e%d", i),
		})
	}
	seedContext(t, s, writes...)
	for q := range 300 {
		kws := strings.Fields(sentence(1 + rng.IntN(4)))
		if q%10 == 0 {
			kws = append(kws, "dog walk") // a phrase
		}
		sq := query{
			UserID:    users[q%len(users)],
			Keywords:  kws,
			At:        t0.Add(time.Duration(rng.IntN(60*24)-30*24) * time.Hour),
			Threshold: []float64{0, 0.3, 0.5}[q%3],
			Limit:     1 + rng.IntN(12),
		}
		got, err := search(ctx, s, sq)
		if err != nil {
			t.Fatal(err)
		}
		tsq := store.TSQuery(sq.Keywords)
		if tsq == "" {
			if len(got) != 0 {
				t.Fatalf("query %d: no usable keyword, got %d items", q, len(got))
			}
			continue
		}
		rows, err := s.Pool().Query(ctx, oracleSQL, sq.UserID, tsq, sq.At, sq.Threshold, sq.Limit, strings.Join(kws, " "))
		if err != nil {
			t.Fatal(err)
		}
		type scored struct {
			ID    int64
			Score float64
		}
		want, err := pgx.CollectRows(rows, pgx.RowToStructByPos[scored])
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("query %d %+v: %d items, oracle %d\ngot  %+v\nwant %+v", q, sq, len(got), len(want), got, want)
		}
		for i := range want {
			if math.Abs(got[i].Score-want[i].Score) > 1e-9 {
				t.Fatalf("query %d %+v: item %d scores %.12f, oracle %.12f", q, sq, i, got[i].Score, want[i].Score)
			}
			// Items whose scores differ only by rounding may swap.
			if got[i].ID != want[i].ID && math.Abs(want[i].Score-got[i].Score) > 1e-12 {
				t.Fatalf("query %d %+v: item %d is %d, oracle %d", q, sq, i, got[i].ID, want[i].ID)
			}
		}
	}
}
