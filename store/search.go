package store

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
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
// recall needs: the user's latest facts (at most $3), the statistics BM25F
// needs over all the user's items, the query's lexemes, and the candidates,
// which are the user's items matching the tsquery. The ranking itself is done
// in Go (see rank): computing it in SQL, by unnesting every candidate's
// tsvector, cost three times the rest of the statement.
//
// One row is the head (head = true: statistics, lexemes, facts as parallel
// arrays), every other row a candidate (head = false). The user's
// rows are read through the user index and only then matched: OFFSET 0 keeps
// the planner from flattening the subquery, so no plan, generic plans
// included, can start from the GIN index's posting list of every user's items
// (see docs/performance.md). The statistics are an index-only scan of
// context_user_len_idx. $2 = ” (no usable keyword) reads no candidate.
const recallSQL = `
	WITH kw AS MATERIALIZED (SELECT to_tsquery('english', $2) AS q)
	SELECT true AS head, coll.n, coll.avgq, coll.avga, tsvector_to_array(to_tsvector('english', $4)) AS terms,
		f.keys, f.vals, f.source_ats, f.event_ids, f.updated_ats,
		0::bigint, '', '', now(), '', '', 0::float8, 0::float8, ''
	FROM (SELECT count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq, greatest(avg(answer_len), 1)::float8 AS avga
		FROM context WHERE user_id = $1) coll,
		(SELECT array_agg(key ORDER BY source_at DESC, key) AS keys, array_agg(value ORDER BY source_at DESC, key) AS vals,
			array_agg(source_at ORDER BY source_at DESC, key) AS source_ats, array_agg(event_id ORDER BY source_at DESC, key) AS event_ids,
			array_agg(updated_at ORDER BY source_at DESC, key) AS updated_ats
		FROM (SELECT key, value, source_at, event_id, updated_at FROM facts WHERE user_id = $1 ORDER BY source_at DESC, key LIMIT $3) f0) f
	UNION ALL
	SELECT false, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL,
		c.id, c.question, c.answer, c.created_at, c.event_id, c.conversation_id, c.question_len::float8, c.answer_len::float8, c.search::text
	FROM (SELECT id, question, answer, created_at, event_id, conversation_id, question_len, answer_len, search
		FROM context WHERE user_id = $1 AND $2 <> '' OFFSET 0) c, kw
	WHERE c.search @@ kw.q`

// collection is what BM25F needs to know of all the user's items.
type collection struct {
	n, avgq, avga float64 // item count, mean question and answer lengths (at least 1)
}

// candidate is an item matching the query, with what ranking it needs.
type candidate struct {
	item       ContextItem
	qlen, alen float64
	search     string // the tsvector's text form
}

// rank scores the candidates (see Search scoring) for the query lexemes terms
// at time at, and returns those scoring at least threshold, best first (ties:
// newest, then highest id), at most limit. A candidate holding none of the
// terms (possible only through a tsquery/tsvector parsing difference) scores
// nothing and is dropped, as is one whose tsvector cannot be read.
func rank(cands []candidate, terms []string, coll collection, at time.Time, threshold float64, limit int) []ContextItem {
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
		if err := tf.read(c.search, terms); err != nil {
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
	out := make([]ContextItem, 0, min(limit, len(cands)))
	for i := range cands {
		if !matched[i] {
			continue
		}
		s := sums[i]
		age := max(at.Sub(cands[i].item.CreatedAt).Seconds(), 0)
		score := s / (s + RelevanceHalf) * (1 - RecencyWeight + RecencyWeight/(1+age/(RecencyDays*86400)))
		if score < threshold {
			continue
		}
		it := cands[i].item
		it.Score = score
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b ContextItem) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// termCounts counts, for each query lexeme, its positions in one tsvector's
// question (weight A) and answer (any other weight). It is reused across
// candidates to avoid allocating per item.
type termCounts struct {
	counts []termCount
	lex    []byte
}

type termCount struct {
	seen             bool
	question, answer int
}

// read parses the text form of a tsvector ('lexeme':1A,5B 'other':3 …, with
// ' and \ doubled inside lexemes; weight D is not written) and counts the
// positions of each of terms.
func (tc *termCounts) read(v string, terms []string) error {
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
		// The lexeme, unescaped into tc.lex.
		tc.lex = tc.lex[:0]
		for {
			if i >= len(v) {
				return fmt.Errorf("tsvector: unterminated lexeme")
			}
			ch := v[i]
			if (ch == '\'' || ch == '\\') && i+1 < len(v) && v[i+1] == ch {
				tc.lex = append(tc.lex, ch)
				i += 2
				continue
			}
			if ch == '\'' {
				i++
				break
			}
			tc.lex = append(tc.lex, ch)
			i++
		}
		t := slices.Index(terms, string(tc.lex)) // no allocation: the conversion is only compared
		var n *termCount
		if t >= 0 {
			n = &tc.counts[t]
			n.seen = true
		}
		if i >= len(v) || v[i] != ':' {
			continue // a lexeme without positions
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
			if n != nil {
				if w == 'A' {
					n.question++
				} else {
					n.answer++
				}
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
	rows, err := s.db.Query(ctx, recallSQL, q.UserID, tsq, maxFacts, terms)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		h     recallHead
		c     candidate
		cands []candidate
	)
	for rows.Next() {
		// Every row has the head's and a candidate's columns; the part a
		// row is not about holds placeholders.
		var r recallHead
		if err := rows.Scan(&r.head, &r.coll.n, &r.coll.avgq, &r.coll.avga, &r.terms,
			&r.keys, &r.values, &r.sourceAts, &r.eventIDs, &r.updatedAts,
			&c.item.ID, &c.item.Question, &c.item.Answer, &c.item.CreatedAt, &c.item.EventID, &c.item.ConversationID,
			&c.qlen, &c.alen, &c.search); err != nil {
			return nil, nil, err
		}
		if r.head {
			h = r
			continue
		}
		c.item.UserID = q.UserID
		cands = append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if !h.head {
		return nil, nil, fmt.Errorf("recall read no head row")
	}
	facts := make([]Fact, len(h.keys))
	for i := range facts {
		facts[i] = Fact{UserID: q.UserID, Key: h.keys[i], Value: h.values[i], SourceAt: h.sourceAts[i], EventID: h.eventIDs[i], UpdatedAt: h.updatedAts[i]}
	}
	return facts, rank(cands, h.terms, h.coll, at, q.Threshold, q.Limit), nil
}

// recallHead is recallSQL's first row.
type recallHead struct {
	head                   bool
	coll                   collection
	terms                  []string // the query's lexemes
	keys, values, eventIDs []string // the facts, as parallel arrays
	sourceAts, updatedAts  []time.Time
}
