package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Search scoring.
//
// A context item's score is relevance × recency, both in 0..1, so a threshold
// on the score keeps one meaning whatever the query and however many items
// the user has. Relevance is BM25F (Okapi BM25 over two fields) computed on
// the user's own items:
//
//   - For each distinct query lexeme t (english stemming: "dogs" finds "dog")
//     an item holds, its field-weighted frequency is
//
//     f = tfq / (1 − B + B·lenq/avgq) + AnswerWeight · tfa / (1 − B + B·lena/avga)
//
//     where tfq and tfa count t in the question and in the answer, lenq and
//     lena are those fields' lengths (distinct lexemes) and avgq and avga
//     their means over the user's items: a word in a short question counts
//     more than in a long one, and the assistant's words count less than the
//     user's.
//
//   - t contributes idf(t) · f·(K1+1)/(f+K1) (repeats saturate), with
//     idf(t) = ln(1 + (n + IDFPrior − df + 0.5)/(df + 0.5)), n the user's
//     items and df those holding t: a word found in many of the user's items
//     says little about any of them. IDFPrior counts that many imaginary
//     items without the word, so that for a user with a handful of items
//     every word is not "common".
//
//   - s is the sum over the query's lexemes, and relevance = s/(s +
//     RelevanceHalf). One keyword held by one item in a hundred, found once
//     in a question of average length, gives s ≈ 4.4 and scores 0.64; found
//     only in the answer 0.56; a keyword in a third of the user's items
//     scores about 0.34 in a question; more keywords approach 1. The scale
//     is absolute, not relative to the best candidate, so a weak match stays
//     weak when nothing better exists.
//
//   - recency = 1 − RecencyWeight + RecencyWeight/(1 + age_days/RecencyDays),
//     age measured from the item's created_at (the turn's time) to the
//     query's At; an item newer than At counts as age 0. It is a bounded
//     prior: it orders equally relevant items newest first, but an item
//     keeps at least 1 − RecencyWeight of its relevance however old, so a
//     better match is not buried because it was said months ago.
//
// The constants were chosen on public conversational-memory benchmarks
// (LoCoMo, LongMemEval), the same values for both; see docs/quality.md.
const (
	// K1 is the term-frequency saturation of BM25.
	K1 = 1.2
	// B is how much a field's length normalises its term frequency (0: not
	// at all, 1: fully).
	B = 0.5
	// AnswerWeight is the weight of an answer word against a question word.
	AnswerWeight = 0.6
	// IDFPrior is the number of imaginary items without any query word that
	// document frequencies are smoothed with.
	IDFPrior = 20.0
	// RelevanceHalf is the BM25 sum at which relevance is 0.5.
	RelevanceHalf = 2.5
	// RecencyWeight is the share of the score that recency can take away.
	RecencyWeight = 0.05
	// RecencyDays is the age at which the recency prior is half spent.
	RecencyDays = 30.0
)

// Bounds on a search's keywords: they keep a hostile or huge message from
// producing a huge query.
const (
	// MaxKeywords is the most keywords a query uses; the rest are ignored.
	MaxKeywords = 32
	// MaxKeywordBytes is the longest keyword used; longer ones are ignored
	// (Postgres does not index words over 2047 characters anyway).
	MaxKeywordBytes = 100
)

// SearchQuery is a ranked full-text search over one user's context items.
type SearchQuery struct {
	// UserID scopes the search; only this user's items are read.
	UserID string
	// Keywords are ORed: an item matching any of them is a candidate. Any
	// text is safe here; see TSQuery.
	Keywords []string
	// At is the time recency is measured against. Zero means now.
	At time.Time
	// Threshold drops items scoring below it (0..1).
	Threshold float64
	// Limit caps the number of items returned. Must be at least 1.
	Limit int
}

// TSQuery builds the text of an english to_tsquery that matches any of
// keywords. Each keyword becomes one quoted lexeme (quotes doubled, backslashes escaped, invalid
// UTF-8 and NUL removed), so no input can inject tsquery operators or make
// to_tsquery fail; a keyword the english parser splits in several words
// becomes a phrase. Empty keywords, keywords over MaxKeywordBytes and those
// past MaxKeywords are skipped. It returns "" when no keyword is left.
func TSQuery(keywords []string) string {
	q, _ := tsQuery(keywords)
	return q
}

// tsQuery returns TSQuery's text and the keywords it kept, space-separated
// (the text whose english lexemes are the query's terms).
func tsQuery(keywords []string) (string, string) {
	var b, terms strings.Builder
	n := 0
	for _, k := range keywords {
		if n == MaxKeywords {
			break
		}
		if !utf8.ValidString(k) {
			k = strings.ToValidUTF8(k, " ")
		}
		k = strings.TrimSpace(strings.ReplaceAll(k, "\x00", " "))
		if k == "" || len(k) > MaxKeywordBytes {
			continue
		}
		if n > 0 {
			b.WriteString(" | ")
			terms.WriteByte(' ')
		}
		terms.WriteString(k)
		b.WriteByte('\'')
		for _, r := range k {
			switch r {
			case '\'':
				b.WriteString("''")
			case '\\':
				b.WriteString(`\\`)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('\'')
		n++
	}
	return b.String(), terms.String()
}

// searchSQL ranks one user's matching context items (see Search scoring),
// in one statement. kw is built once; cand is the user's items holding any
// keyword: the user's rows are read through the user index and only then
// matched (OFFSET 0 keeps the planner from flattening the subquery, so no
// plan, generic plans included, can start from the GIN index's posting list
// of every user's items, see docs/performance.md); coll is the user's item
// count and mean field lengths (an index-only scan of context_user_len_idx);
// tf has one row per candidate and query lexeme it holds, with the
// field-weighted, length-normalised frequency. Every item holding a query
// lexeme is a candidate, so counting tf rows per lexeme gives the user's
// document frequency.
var searchSQL = fmt.Sprintf(`
	WITH kw AS MATERIALIZED (
		SELECT to_tsquery('english', $2) AS q, tsvector_to_array(to_tsvector('english', $6)) AS terms
	), cand AS MATERIALIZED (
		SELECT c.id, c.created_at, c.search, c.question_len, c.answer_len
		FROM (SELECT id, created_at, search, question_len, answer_len FROM context WHERE user_id = $1 OFFSET 0) c, kw
		WHERE c.search @@ kw.q
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
		FROM tf JOIN idf USING (lexeme)
		GROUP BY tf.id
	), scored AS (
		SELECT cand.id, cand.created_at,
			bm.s / (bm.s + %[5]g)
			* (1 - %[6]g + %[6]g / (1 + greatest(extract(epoch FROM ($3::timestamptz - cand.created_at)), 0) / %[7]g)) AS score
		FROM cand JOIN bm USING (id)
	)
	SELECT c.id, c.user_id, c.question, c.answer, c.created_at, c.event_id, c.conversation_id, s.score::float8
	FROM scored s JOIN context c ON c.id = s.id
	WHERE s.score >= $4
	ORDER BY s.score DESC, s.created_at DESC, s.id DESC
	LIMIT $5`, K1, B, AnswerWeight, IDFPrior, RelevanceHalf, RecencyWeight, RecencyDays*86400)

// SearchSQL returns the statement SearchContext and Recall run and its
// arguments for q, so that benchmarks measure exactly that query. tsq is ""
// when no keyword is usable (the store then skips the query).
func SearchSQL(q SearchQuery) (sql, tsq string, args []any, err error) {
	tsq, args, err = q.args()
	return searchSQL, tsq, args, err
}

const recallFactsSQL = `SELECT user_id, key, value, source_at, event_id, updated_at FROM facts
	WHERE user_id = $1 ORDER BY source_at DESC, key LIMIT $2`

func (q SearchQuery) args() (string, []any, error) {
	if q.Limit < 1 {
		return "", nil, fmt.Errorf("limit %d is under 1", q.Limit)
	}
	at := q.At
	if at.IsZero() {
		at = now()
	}
	tsq, terms := tsQuery(q.Keywords)
	return tsq, []any{q.UserID, tsq, at, q.Threshold, q.Limit, terms}, nil
}

func scanScored(row pgx.CollectableRow) (ContextItem, error) {
	var c ContextItem
	err := row.Scan(&c.ID, &c.UserID, &c.Question, &c.Answer, &c.CreatedAt, &c.EventID, &c.ConversationID, &c.Score)
	return c, err
}

// SearchContext returns the user's context items matching any keyword, best
// score first (ties: newest first), at most q.Limit, none under q.Threshold.
// It never fails because of the keywords' content.
func (s *Store) SearchContext(ctx context.Context, q SearchQuery) ([]ContextItem, error) {
	tsq, args, err := q.args()
	if err != nil {
		return nil, fmt.Errorf("search context: %w", err)
	}
	if tsq == "" {
		return []ContextItem{}, nil
	}
	rows, err := s.db.Query(ctx, searchSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("search context: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanScored)
	if err != nil {
		return nil, fmt.Errorf("search context: %w", err)
	}
	return items, nil
}

// RecallQuery is what enrich reads: a search plus the user's facts.
type RecallQuery struct {
	SearchQuery
	// MaxFacts caps the facts returned, most recent first. Must be at least 1.
	MaxFacts int
}

// Recall returns the user's facts (most recently set first, at most
// q.MaxFacts) and the context items SearchContext would return, in one round
// trip to Postgres (a pipelined batch).
func (s *Store) Recall(ctx context.Context, q RecallQuery) ([]Fact, []ContextItem, error) {
	if q.MaxFacts < 1 {
		return nil, nil, fmt.Errorf("recall: max facts %d is under 1", q.MaxFacts)
	}
	tsq, args, err := q.args()
	if err != nil {
		return nil, nil, fmt.Errorf("recall: %w", err)
	}
	sender, ok := s.db.(interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	})
	if !ok {
		return nil, nil, fmt.Errorf("recall: %T cannot send a batch", s.db)
	}
	var (
		batch pgx.Batch
		facts []Fact
		items = []ContextItem{}
	)
	// One snapshot for both reads, so a reply never shows a turn's context
	// without the facts committed with it; still one round trip. (Inside a
	// caller's transaction that transaction's isolation applies instead.)
	own := s.db == DBTX(s.pool)
	if own {
		batch.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY`)
	}
	batch.Queue(recallFactsSQL, q.UserID, q.MaxFacts).Query(func(rows pgx.Rows) (err error) {
		facts, err = pgx.CollectRows(rows, scanFact)
		return err
	})
	if tsq != "" {
		batch.Queue(searchSQL, args...).Query(func(rows pgx.Rows) (err error) {
			items, err = pgx.CollectRows(rows, scanScored)
			return err
		})
	}
	if own {
		batch.Queue(`COMMIT`)
	}
	if err := sender.SendBatch(ctx, &batch).Close(); err != nil {
		return nil, nil, fmt.Errorf("recall: %w", err)
	}
	return facts, items, nil
}
