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
// on the score keeps one meaning whatever the query:
//
//   - relevance is r/(r+RelevanceHalf), where r is ts_rank_cd (cover density,
//     no length normalisation) of the item's weighted search vector against
//     the OR query. Question words weigh 1.0 and answer words 0.4, so one
//     keyword found in the question scores 0.67, one found only in the answer
//     0.44, and more matches approach 1. (ts_rank_cd's own flag 32 is
//     r/(r+1): one answer match would score 0.29, under the default enrich
//     threshold of 0.3 even for an item made a second ago.) The scale is
//     absolute, not relative to the best candidate, so a weak match stays
//     weak when nothing better exists.
//   - recency is 1/(1 + age_days/30), age measured from the item's created_at
//     (the turn's time) to the query's At; an item newer than At counts as
//     age 0.
const RelevanceHalf = 0.5

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
	var b strings.Builder
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
		}
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
	return b.String()
}

// searchSQL ranks one user's matching context items. The tsquery is built once
// per statement (a one-row FROM item) and ranked only on matching rows.
const searchSQL = `
	SELECT id, user_id, question, answer, created_at, event_id, conversation_id, score
	FROM (
		SELECT c.id, c.user_id, c.question, c.answer, c.created_at, c.event_id, c.conversation_id,
			(r.r / (r.r + $6::float8))
			/ (1 + greatest(extract(epoch FROM ($3::timestamptz - c.created_at)), 0) / 2592000.0) AS score
		FROM context c
			CROSS JOIN to_tsquery('english', $2) q
			CROSS JOIN LATERAL (SELECT ts_rank_cd(c.search, q)::float8 AS r) r
		WHERE c.user_id = $1 AND c.search @@ q
	) s
	WHERE score >= $4
	ORDER BY score DESC, created_at DESC, id DESC
	LIMIT $5`

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
	tsq := TSQuery(q.Keywords)
	return tsq, []any{q.UserID, tsq, at, q.Threshold, q.Limit, RelevanceHalf}, nil
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
