package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
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

// recallSQL reads, in one statement and so from one snapshot, everything a
// recall needs: the statistics BM25F needs over all the user's items and the
// query's lexemes (kind 0, one row), the user's latest facts (kind 1, at most
// $3, most recent first), and the candidates (kind 2): the user's items
// matching the tsquery. The ranking itself is done in Go (see rank):
// computing it in SQL, by unnesting every candidate's tsvector, cost three
// times the rest of the statement. Columns a row's kind does not use are
// NULL; facts carry their key and value in a and b and source_at in at.
//
// The user's items are read through the user index and only then matched:
// OFFSET 0 keeps the planner from flattening the subquery, so no plan,
// generic plans included, can start from the GIN index's posting list of
// every user's items (see docs/performance.md). The statistics are an
// index-only scan of context_user_len_idx. $2 = ” (no usable keyword) reads
// no candidate.
const recallSQL = `
	WITH kw AS MATERIALIZED (SELECT to_tsquery('english', $2) AS q)
	SELECT 0::int2 AS kind, count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq,
		greatest(avg(answer_len), 1)::float8 AS avga, tsvector_to_array(to_tsvector('english', $4)) AS terms,
		NULL::bigint AS id, NULL::text AS a, NULL::text AS b, NULL::timestamptz AS at, NULL::timestamptz AS updated_at,
		NULL::text AS event_id, NULL::text AS conversation_id, NULL::float8 AS qlen, NULL::float8 AS alen, NULL::text AS search
	FROM context WHERE user_id = $1
	UNION ALL
	(SELECT 1, NULL, NULL, NULL, NULL, NULL, key, value, source_at, updated_at, event_id, NULL, NULL, NULL, NULL
	FROM facts WHERE user_id = $1 ORDER BY source_at DESC, key LIMIT $3)
	UNION ALL
	SELECT 2, NULL, NULL, NULL, NULL, c.id, c.question, c.answer, c.created_at, NULL, c.event_id, c.conversation_id,
		c.question_len, c.answer_len, c.search::text
	FROM (SELECT id, question, answer, created_at, event_id, conversation_id, question_len, answer_len, search
		FROM context WHERE user_id = $1 AND $2 <> '' OFFSET 0) c, kw
	WHERE c.search @@ kw.q`

// Row kinds of recallSQL.
const (
	rowStats     = 0
	rowFact      = 1
	rowCandidate = 2
)

// collection is what BM25F needs to know of all the user's items.
type collection struct {
	n, avgq, avga float64 // item count, mean question and answer lengths (at least 1)
}

// candidate is an item matching the query, as read by recall: its texts
// stay in the recall's arena (see span) until it is known to be returned.
type candidate struct {
	id                      int64
	createdAt               time.Time
	qlen, alen              float64
	question, answer        span
	eventID, conversationID span
	search                  span // the tsvector's text form
}

// span is a slice of an arena, by offsets so the arena can grow.
type span struct{ start, end int }

func (sp span) of(arena []byte) []byte { return arena[sp.start:sp.end] }

// push appends b to the arena and returns its span.
func push(arena *[]byte, b []byte) span {
	start := len(*arena)
	*arena = append(*arena, b...)
	return span{start, len(*arena)}
}

// rank scores the candidates (see Search scoring) for the query lexemes terms
// at time at, and returns those scoring at least threshold, best first (ties:
// newest, then highest id), at most limit, with the user's id set. A
// candidate holding none of the terms (possible only through a
// tsquery/tsvector parsing difference) scores nothing and is dropped, as is
// one whose tsvector cannot be read.
func rank(userID string, cands []candidate, arena []byte, terms []string, coll collection, at time.Time, threshold float64, limit int) []ContextItem {
	type hit struct {
		cand int
		f    float64
	}
	// hits[t] lists the candidates holding terms[t]; len(hits[t]) is its
	// document frequency among the user's items, since every item holding a
	// query lexeme is a candidate.
	hits := make([][]hit, len(terms))
	var tf termCounts
	for i := range cands {
		c := &cands[i]
		if err := tf.read(c.search.of(arena), terms); err != nil {
			continue
		}
		for t, n := range tf.counts {
			if !n.seen {
				continue
			}
			f := float64(n.question)/(1-B+B*c.qlen/coll.avgq) + AnswerWeight*float64(n.answer)/(1-B+B*c.alen/coll.avga)
			hits[t] = append(hits[t], hit{i, f})
		}
	}
	type scored struct {
		cand  int
		score float64
	}
	sums := make([]float64, len(cands))
	matched := make([]bool, len(cands))
	for _, hs := range hits {
		df := float64(len(hs))
		idf := math.Log(1 + (coll.n+IDFPrior-df+0.5)/(df+0.5))
		for _, h := range hs {
			sums[h.cand] += idf * h.f * (K1 + 1) / (h.f + K1)
			matched[h.cand] = true
		}
	}
	kept := make([]scored, 0, len(cands))
	for i := range cands {
		if !matched[i] {
			continue
		}
		s := sums[i]
		age := max(at.Sub(cands[i].createdAt).Seconds(), 0)
		score := s / (s + RelevanceHalf) * (1 - RecencyWeight + RecencyWeight/(1+age/(RecencyDays*86400)))
		if score >= threshold {
			kept = append(kept, scored{i, score})
		}
	}
	slices.SortFunc(kept, func(x, y scored) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		a, b := &cands[x.cand], &cands[y.cand]
		if c := b.createdAt.Compare(a.createdAt); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	kept = kept[:min(len(kept), limit)]
	out := make([]ContextItem, len(kept))
	for i, k := range kept {
		c := &cands[k.cand]
		out[i] = ContextItem{
			ID:             c.id,
			UserID:         userID,
			Question:       string(c.question.of(arena)),
			Answer:         string(c.answer.of(arena)),
			CreatedAt:      c.createdAt,
			EventID:        string(c.eventID.of(arena)),
			ConversationID: string(c.conversationID.of(arena)),
			Score:          k.score,
		}
	}
	return out
}

// termCounts counts, for each query lexeme, its positions in one tsvector's
// question (weight A) and answer (any other weight). It is reused across
// candidates so that reading them allocates nothing.
type termCounts struct {
	counts []termCount
	lex    []byte // an escaped lexeme, unescaped
}

type termCount struct {
	seen             bool
	question, answer int
}

// read parses the text form of a tsvector ('lexeme':1A,5B 'other':3 …, with
// ' and \ doubled inside lexemes; weight D is not written) and counts the
// positions of each of terms. Lexemes that are not terms are skipped without
// reading their positions.
func (tc *termCounts) read(v []byte, terms []string) error {
	tc.counts = slices.Grow(tc.counts[:0], len(terms))[:len(terms)]
	clear(tc.counts)
	i := 0
	for i < len(v) {
		if v[i] == ' ' {
			i++
			continue
		}
		if v[i] != '\'' {
			return fmt.Errorf("tsvector: want a quote at %d", i)
		}
		i++
		end := bytes.IndexByte(v[i:], '\'')
		if end < 0 {
			return errors.New("tsvector: unterminated lexeme")
		}
		lex := v[i : i+end]
		if (i+end+1 < len(v) && v[i+end+1] == '\'') || bytes.IndexByte(lex, '\\') >= 0 {
			// Escapes: unescape into tc.lex.
			tc.lex = tc.lex[:0]
			for {
				if i >= len(v) {
					return errors.New("tsvector: unterminated lexeme")
				}
				ch := v[i]
				if (ch == '\'' || ch == '\\') && i+1 < len(v) && v[i+1] == ch {
					tc.lex = append(tc.lex, ch)
					i += 2
					continue
				}
				if ch == '\'' {
					break
				}
				tc.lex = append(tc.lex, ch)
				i++
			}
			lex = tc.lex
		} else {
			i += end
		}
		i++ // the closing quote
		var n *termCount
		for t, term := range terms {
			if string(lex) == term { // compared, not converted: no allocation
				n = &tc.counts[t]
				n.seen = true
				break
			}
		}
		if i >= len(v) || v[i] != ':' {
			continue // a lexeme without positions
		}
		if n == nil {
			// Not a query lexeme: positions hold neither spaces nor quotes.
			if sp := bytes.IndexByte(v[i:], ' '); sp >= 0 {
				i += sp
			} else {
				i = len(v)
			}
			continue
		}
		i++
		// Positions: digits, then the weight letter (none for D), comma-separated.
		for {
			for i < len(v) && v[i] >= '0' && v[i] <= '9' {
				i++
			}
			w := byte('D')
			if i < len(v) && v[i] >= 'A' && v[i] <= 'C' {
				w = v[i]
				i++
			}
			if w == 'A' {
				n.question++
			} else {
				n.answer++
			}
			if i >= len(v) || v[i] != ',' {
				break
			}
			i++
		}
		if i < len(v) && v[i] != ' ' {
			return fmt.Errorf("tsvector: unexpected %q at %d", v[i], i)
		}
	}
	return nil
}

// RecallQuery is what enrich reads: a search plus the user's facts.
type RecallQuery struct {
	SearchQuery
	// MaxFacts caps the facts returned, most recent first. Must be at least 1.
	MaxFacts int
}

// SearchContext returns the user's context items matching any keyword, best
// score first (ties: newest first), at most q.Limit, none under q.Threshold.
// It never fails because of the keywords' content.
func (s *Store) SearchContext(ctx context.Context, q SearchQuery) ([]ContextItem, error) {
	_, items, err := s.recall(ctx, q, 0)
	if err != nil {
		return nil, fmt.Errorf("search context: %w", err)
	}
	return items, nil
}

// Recall returns the user's facts (most recently set first, at most
// q.MaxFacts) and the context items SearchContext would return, from one
// statement: one round trip to Postgres and one snapshot, so a reply never
// shows a turn's context without the facts committed with it.
func (s *Store) Recall(ctx context.Context, q RecallQuery) ([]Fact, []ContextItem, error) {
	if q.MaxFacts < 1 {
		return nil, nil, fmt.Errorf("recall: max facts %d is under 1", q.MaxFacts)
	}
	facts, items, err := s.recall(ctx, q.SearchQuery, q.MaxFacts)
	if err != nil {
		return nil, nil, fmt.Errorf("recall: %w", err)
	}
	return facts, items, nil
}

// recall runs recallSQL and ranks its candidates. facts is never nil.
func (s *Store) recall(ctx context.Context, q SearchQuery, maxFacts int) ([]Fact, []ContextItem, error) {
	if q.Limit < 1 {
		return nil, nil, fmt.Errorf("limit %d is under 1", q.Limit)
	}
	at := q.At
	if at.IsZero() {
		at = now()
	}
	tsq, terms := tsQuery(q.Keywords)
	if tsq == "" && maxFacts == 0 {
		return []Fact{}, []ContextItem{}, nil // nothing to read: no round trip
	}
	rows, err := s.db.Query(ctx, recallSQL, q.UserID, tsq, maxFacts, terms)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		kind                int16
		coll                collection
		lexemes             []string
		facts               = []Fact{}
		f                   Fact
		c                   candidate
		cands               []candidate
		arena               []byte
		q1, a1, ev, conv, v pgtype.DriverBytes // valid until the next row: copied to arena
		sawStats            bool
	)
	// Each kind of row scans its own columns; nil skips the others.
	statsDest := []any{nil, &coll.n, &coll.avgq, &coll.avga, &lexemes, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
	factDest := []any{nil, nil, nil, nil, nil, nil, &f.Key, &f.Value, &f.SourceAt, &f.UpdatedAt, &f.EventID, nil, nil, nil, nil}
	candDest := []any{nil, nil, nil, nil, nil, &c.id, &q1, &a1, &c.createdAt, nil, &ev, &conv, &c.qlen, &c.alen, &v}
	kindDest := make([]any, len(candDest))
	kindDest[0] = &kind
	for rows.Next() {
		if err := rows.Scan(kindDest...); err != nil {
			return nil, nil, err
		}
		switch kind {
		case rowStats:
			err = rows.Scan(statsDest...)
			sawStats = true
		case rowFact:
			if err = rows.Scan(factDest...); err == nil {
				f.UserID = q.UserID
				facts = append(facts, f)
			}
		case rowCandidate:
			if err = rows.Scan(candDest...); err == nil {
				c.question, c.answer = push(&arena, q1), push(&arena, a1)
				c.eventID, c.conversationID, c.search = push(&arena, ev), push(&arena, conv), push(&arena, v)
				cands = append(cands, c)
			}
		default:
			err = fmt.Errorf("recall read a row of kind %d", kind)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if !sawStats {
		return nil, nil, errors.New("recall read no statistics row")
	}
	// Facts come in the statement's order; a stable sort on the time alone
	// keeps it (ties by key, in the database's collation) and guarantees
	// the most recent first.
	slices.SortStableFunc(facts, func(x, y Fact) int { return y.SourceAt.Compare(x.SourceAt) })
	return facts, rank(q.UserID, cands, arena, lexemes, coll, at, q.Threshold, q.Limit), nil
}
