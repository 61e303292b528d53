package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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

// SearchQuery selects the candidates of a search over one user's context
// items: every item holding any of the keywords' lexemes.
type SearchQuery struct {
	// UserID scopes the search; only this user's items are read.
	UserID string
	// Keywords are ORed: an item matching any of them is a candidate. Any
	// text is safe here; see TSQuery.
	Keywords []string
	// Scope, when not "", narrows the search to the user's items of that
	// scope: only they are candidates, and the statistics are over them
	// alone (the collection ranked is the scope's). "" reads all the
	// user's items, whatever their scope.
	Scope string
	// Since and Until, when not zero, narrow the candidates to the items
	// created (the time of the turn they came from) in [Since, Until); a
	// zero bound is open. The statistics stay over all the (scope's)
	// items: the range filters what is ranked, not how, so a search's
	// scores do not depend on its range, but for a phrase query or a
	// scoped one, whose document frequencies are the range's candidates'
	// (Candidates.DF is nil). Since must be before Until when both are
	// set.
	Since, Until time.Time
	// Latest, when the keywords leave no usable keyword and a range is
	// set, makes the candidates Latest of the range's items (rather than
	// none), with no term counts: a question about a time alone ("what did
	// we talk about yesterday?"). They are spread evenly over the range in
	// time, one of each of Latest equal runs of its items, so that they
	// cover the range rather than its last minutes (whose newest turn is
	// often a goodbye): of the few nearest the run's middle, the one with
	// the most words, so that a run's topic wins over its greetings and
	// thanks (latestCandidatesSQL). All of them when there are no more.
	// Matches holds those picks first (one a run, in time order, newest
	// first), then each run's second choice, in the same order: reserves,
	// for a pick too large for a reply. 0 reads none, as without a range.
	Latest int
	// Hybrid asks for the user's embedding generation with the candidates
	// (Candidates.Generation), and adds VectorIDs to them: the items the
	// vector side of a hybrid search picked, whether or not they hold a
	// keyword (their term counts say which they hold), within Scope and the
	// range. Ids of other users' items or of items gone are not returned.
	// Ignored with Latest.
	Hybrid    bool
	VectorIDs []int64
	// Prune, when its Share is above 0, lets a search that is an OR of
	// lexemes over all the user's items (no Scope, no range, not Hybrid)
	// leave out the items that hold only common lexemes: see Prune.
	// Ignored otherwise.
	Prune Prune
}

// Prune is how a search may leave common lexemes' items out of its
// candidates (MaxScore pruning: the ranking, which store does not know,
// decides whether what was read is enough; see Candidates.Skipped). For a
// user of at least MinItems items, a lexeme held by more than Share of them
// is skipped: its items are candidates only if they hold another lexeme
// (the rarest lexeme is never skipped). The candidates still carry the
// counts of every lexeme, and Candidates.DF every lexeme's document
// frequency, so that those read rank as in a full read.
//
// Except asks for the rest of a pruned read instead: the items holding
// a query lexeme but none of Except (the lexemes the pruned read kept), so
// that the two reads' Matches are together every candidate.
type Prune struct {
	// Share is the share of the user's items above which a lexeme is
	// skipped (0 < Share < 1; 0: no pruning).
	Share float64
	// MinItems is the fewest items a user has for any lexeme to be
	// skipped; under it the read is a full one (and gives no DF).
	MinItems int
	// Except, when not empty, makes the search the rest of a pruned one
	// (Share and MinItems unused): its Matches are the items holding none
	// of these lexemes, and it gives no DF.
	Except []string
}

// pruned reports whether q's candidates may be pruned (or are the rest of
// a pruned read).
func (q SearchQuery) pruned() bool {
	return (q.Prune.Share > 0 || len(q.Prune.Except) > 0) && q.Prunable()
}

// Prunable reports whether a Prune applies to q: a keyword-only read of
// all the user's memory (no scope, range or vectors), whose Stats then
// count all the user's items.
func (q SearchQuery) Prunable() bool { return q.Scope == "" && !q.ranged() && !q.Hybrid }

// ranged reports whether q has a range.
func (q SearchQuery) ranged() bool { return !q.Since.IsZero() || !q.Until.IsZero() }

// TSQuery builds the text of a to_tsquery that matches any of keywords,
// parsed under the user's text search configuration (english unless set,
// see SetLanguage; after memoryd_cjk split CJK runs into bigrams). Each keyword becomes one quoted lexeme (quotes doubled,
// backslashes escaped, invalid UTF-8 and NUL removed), so no input can
// inject tsquery operators or make to_tsquery fail; a keyword the parser
// splits in several words (a CJK run of three characters or more: its bigrams in order, which match where the run occurs) becomes a
// phrase. Empty keywords, keywords over MaxKeywordBytes and those past
// MaxKeywords are skipped. It returns "" when no keyword is left.
func TSQuery(keywords []string) string {
	q, _ := tsQuery(keywords)
	return q
}

// tsQuery returns TSQuery's text and the keywords it kept, space-separated
// (the text whose lexemes, under the user's configuration, are the query's
// terms).
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
// recall needs but the candidates' texts: the statistics ranking needs over
// all the user's items and the query's lexemes (kind 0, one row; parsed
// under the user's text search configuration, cfg, the one the user's items
// are indexed with: see SetLanguage; its id column counts the user's default
// document collections, see Candidates.DocDefaults), the user's facts (kind
// 1, at most $3: those of the first keys, {core}, the statement's last
// parameter, then the others, each most recent first), and the
// candidates: the user's items matching the tsquery, with their term
// counts. Columns a row's kind does
// not use are NULL; facts carry their key and value in a and b and
// source_at in at. The texts of the few items ranking keeps are read after
// it (ContextTexts): on real conversations a query matches hundreds of a
// user's items of ~2 KB each, and shipping them all cost more than the
// second round trip (docs/performance.md, "Realistic corpus"). When the
// lexeme branch finds at most fewCandidates items (cand, few), its rows
// carry their texts (and 1 in n) instead, and no second read is needed.
//
// A query that is an OR of lexemes (any query without a phrase: a keyword
// the parser splits into several words, e.g. a CJK run, makes one) reads
// its candidates from context_terms (migrations/025), kind 4: only the rows
// of the query's lexemes, index-only, with the counts stored at write time,
// aggregated per item into an int8[] (column counts, see readStoredCounts:
// array_agg of packed integers costs Postgres about half the text triples it
// replaced, and pgx ships it in binary), and each item's time and lengths
// from context_user_rank_idx, index-only (migrations/029).
// An item holds one of the lexemes exactly when it matches such a query, so
// the candidates are the tsquery's. A phrase query reads them as before,
// kind 2: the user's items through the user index, matched, with their
// tsvectors, whose counts are decoded in Go (see termCounts). Which branch
// runs is decided once per execution (the subqueries on kw are InitPlans,
// the other branch a one-time filter that reads nothing).
//
// In the phrase branch the user's items are read through the user index and
// only then matched: OFFSET 0 keeps the planner from flattening the
// subquery, so no plan, generic plans included, can start from the GIN
// index's posting list of every user's items (see docs/performance.md). The
// statistics are an index-only scan of context_user_rank_idx. $2 = ” (no
// usable keyword) reads no candidate.
const recallSQL = `
	WITH cfg AS MATERIALIZED (SELECT coalesce((SELECT ts_config FROM user_languages WHERE user_id = $1), 'english') AS c),
	kw AS MATERIALIZED (SELECT q, strpos(q::text, '<') > 0 AS phrase FROM (SELECT memoryd_tsquery(cfg.c, $2) AS q FROM cfg) x),
	tm AS MATERIALIZED (SELECT memoryd_query_terms(cfg.c, $4) AS t FROM cfg),
	cand AS MATERIALIZED (SELECT item_id,
			array_agg((array_position((SELECT t FROM tm), lexeme)::int8 << 32) | (question::int8 << 16) | answer::int8) AS counts
		FROM context_terms WHERE user_id = $1 AND lexeme = ANY((SELECT t FROM tm)::text[]) AND $2 <> '' AND NOT (SELECT phrase FROM kw)
		GROUP BY item_id),
	few AS MATERIALIZED (SELECT count(*) <= {few} AS f FROM cand)
	SELECT 0::int2 AS kind, count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq,
		greatest(avg(answer_len), 1)::float8 AS avga, (SELECT t FROM tm) AS terms,
		(SELECT count(*) FROM doc_defaults WHERE user_id = $1) AS id, NULL::text AS a, NULL::text AS b, NULL::timestamptz AS at, NULL::timestamptz AS updated_at,
		NULL::text AS event_id, NULL::text AS conversation_id, NULL::float8 AS qlen, NULL::float8 AS alen, NULL::text AS search,
		NULL::int8[] AS counts
	FROM context WHERE user_id = $1
	UNION ALL
	(SELECT 1, NULL, NULL, NULL, NULL, NULL, key, value, source_at, updated_at, event_id, conversation_id, NULL, NULL, NULL, NULL
	FROM facts WHERE user_id = $1 ORDER BY key = ANY({core}) DESC, source_at DESC, key LIMIT $3)
	UNION ALL
	SELECT 4, x.one, NULL, NULL, NULL, c.id, x.question, x.answer, c.created_at, NULL, x.event_id, x.conversation_id,
		c.question_len, c.answer_len, NULL, t.counts
	FROM cand t
	JOIN context c ON c.id = t.item_id AND c.user_id = $1{conds}
	LEFT JOIN LATERAL (SELECT 1::float8 AS one, question, answer, event_id, conversation_id
		FROM context WHERE id = c.id AND (SELECT f FROM few)) x ON true
	UNION ALL
	SELECT 2, NULL, NULL, NULL, NULL, c.id, NULL, NULL, c.created_at, NULL, NULL, NULL,
		c.question_len, c.answer_len, c.search::text, NULL
	FROM (SELECT id, created_at, question_len, answer_len, search
		FROM context WHERE user_id = $1 AND $2 <> '' AND (SELECT phrase FROM kw) OFFSET 0) c
	WHERE c.search @@ (SELECT q FROM kw)`

// A scoped recall (recallStatements) reads only the items of one scope,
// through context_user_scope_idx; facts are user-wide and stay unfiltered.

// latestCandidatesSQL replaces recallSQL's candidates for a query with no
// usable keyword and a range (SearchQuery.Latest): one item from each of
// Latest equal runs of the range's items in time order (all of them when
// there are no more), the one with the most words (question_len plus
// answer_len: its distinct lexemes; up to latestEnoughWords) among the
// latestWindow nearest the run's middle, the nearest to the middle first
// on a tie; then each run's second choice, a reserve for a pick the token
// budget drops. A greeting, a thanks or an "ok" says few words and draws a
// short reply, so a run's topic wins over them: the middle item alone was
// small talk about half the time on a walk's realistic month of chats. The range is counted,
// then each run's window read at its offset, both from
// context_user_created_id_idx (or context_user_scope_idx) alone, then the
// windows' rows for their lengths, by id (a join was planned as a scan of
// all the user's items, for the window's unknown LIMIT); only the picks'
// texts are read. BenchmarkRecallLatest (a busy
// 2-core machine): a day's recall as before (2-3 ms), a year of 10,000
// items 5.5-6.8 ms against 2.2-3.2 for its newest three; a window
// numbering every row of the range took about twice that. The tsvector is
// not read: there is no term to count.
//
// Run k of n items newest first is [kn/L, (k+1)n/L), its middle
// (2k+1)n/2L; its window the latestWindow items (or fewer: the run) around
// the middle, kept within the run.
const latestCandidatesSQL = `
	SELECT 2, 1, NULL, NULL, NULL, c.id, c.question, c.answer, c.created_at, NULL, c.event_id, c.conversation_id,
		c.question_len, c.answer_len, ''::text, NULL
	FROM (SELECT c.id, c.question, c.answer, c.created_at, c.event_id, c.conversation_id, c.question_len, c.answer_len
		FROM (SELECT k, lo, hi, mid, least(greatest(mid - {window} / 2, lo), greatest(hi - {window}, lo)) AS o
			FROM (SELECT k, (k * n.n) / {latest} AS lo, ((k + 1) * n.n) / {latest} AS hi, ((2 * k + 1) * n.n) / (2 * {latest}) AS mid
				FROM (SELECT count(*) AS n FROM context WHERE user_id = $1{range}) n, generate_series(0, {latest} - 1) k) b
			WHERE hi > lo) p
		CROSS JOIN LATERAL (SELECT w.id, row_number() OVER (ORDER BY least(w.size, {enough}) DESC, abs(w.x - p.mid), w.x) AS pick FROM (SELECT s.id, (SELECT l.question_len + l.answer_len FROM context l WHERE l.id = s.id) AS size,
					p.o + row_number() OVER (ORDER BY s.created_at DESC, s.id DESC) - 1 AS x
				FROM (SELECT id, created_at FROM context WHERE user_id = $1{range}
					ORDER BY created_at DESC, id DESC OFFSET p.o LIMIT least(p.hi - p.lo, {window})) s) w
			ORDER BY least(w.size, {enough}) DESC, abs(w.x - p.mid), w.x LIMIT 2) r
		JOIN context c ON c.id = r.id ORDER BY r.pick, p.k) c`

// latestEnoughWords is how many words (distinct lexemes) make an item a
// topic for a question about a time alone: past it, more words do not
// win, the middle does, so that a pasted log or file (the most words, and
// too large for the token budget) is no better a pick than a topic.
const latestEnoughWords = 40

// latestWindow is how many items around a run's middle a question about a
// time alone chooses from (latestCandidatesSQL): enough to pass over the
// greetings and thanks around a topic, few enough that the pick stays near
// the middle and costs a few rows a run.
const latestWindow = 7

// recallShape is what decides a recall's statement.
type recallShape struct{ scoped, ranged, latest, hybrid, pruned, rest bool }

// generationSQL is a hybrid recall's row of kind 3: the user's embedding
// generation (migrations/021), read in the candidates' snapshot so that a
// cached copy of the user's vectors is checked without a round trip of its
// own. No row: generation 0, the user has no vectors.
const generationSQL = `
	UNION ALL
	SELECT 3, NULL, NULL, NULL, NULL, generation, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
	FROM embedding_generations WHERE user_id = $1`

// vectorCandidatesSQL adds a hybrid recall's vector ids ({ids}) to its
// candidates, within its scope and range ({conds}): primary-key lookups,
// not a condition on every item the keyword part reads. An id that the
// keywords match too comes twice; recall keeps one.
const vectorCandidatesSQL = `
	UNION ALL
	SELECT 2, NULL, NULL, NULL, NULL, c.id, NULL, NULL, c.created_at, NULL, NULL, NULL,
		c.question_len, c.answer_len, c.search::text, NULL
	FROM context c WHERE c.id = ANY({ids}) AND c.user_id = $1{conds}`

// hybridSQL makes sql (a recall statement with candidates by keyword and
// the conditions conds on the items) hybrid: the vector ids of parameter n
// are candidates too, and the generation row is read.
func hybridSQL(sql, conds string, n int) string {
	v := strings.ReplaceAll(vectorCandidatesSQL, "{ids}", fmt.Sprintf("$%d::bigint[]", n))
	return sql + strings.ReplaceAll(v, "{conds}", conds) + generationSQL
}

// recallStatements holds the statement of each shape, built once: one
// statement per shape rather than conditions that are sometimes true, so
// that each keeps plans of its own and the unscoped, unranged statement
// stays recallSQL. Parameters: $1 user, $2 tsquery, $3 facts, $4 terms,
// then the scope, the range's bounds and the latest limit, in that order,
// for the shapes that have them, and last a hybrid shape's vector ids.
var recallStatements = func() map[recallShape]string {
	m := map[recallShape]string{}
	for _, sh := range []recallShape{{}, {scoped: true}, {ranged: true}, {scoped: true, ranged: true},
		{ranged: true, latest: true}, {scoped: true, ranged: true, latest: true}} {
		sql, n := recallSQL, 4
		scope, conds := "", ""
		if sh.scoped {
			n++
			scope = fmt.Sprintf(" AND scope = $%d", n)
			sql = strings.ReplaceAll(sql, "FROM context WHERE user_id = $1", "FROM context WHERE user_id = $1"+scope)
		}
		if sh.ranged {
			cond := fmt.Sprintf(" AND created_at >= $%d AND created_at < $%d", n+1, n+2)
			conds = cond
			n += 2
			if sh.latest {
				i := strings.Index(sql, "\tUNION ALL\n\tSELECT 4,")
				if i < 0 {
					panic("store: recallSQL has no candidates part")
				}
				latest := strings.ReplaceAll(latestCandidatesSQL, "{range}", scope+cond)
				latest = strings.ReplaceAll(latest, "{window}", strconv.Itoa(latestWindow))
				latest = strings.ReplaceAll(latest, "{enough}", strconv.Itoa(latestEnoughWords))
				sql = sql[:i] + "\tUNION ALL" + strings.ReplaceAll(latest, "{latest}", fmt.Sprintf("$%d", n+1))
			} else {
				sql = strings.Replace(sql, "AND (SELECT phrase FROM kw) OFFSET 0", "AND (SELECT phrase FROM kw)"+cond+" OFFSET 0", 1)
				// Only the range's items are aggregated: the whole
				// memory's were, then joined to the range (16 ms for a
				// day's question whose words are in 10,000 items). The
				// query's lexemes' rows are read first, behind OFFSET 0,
				// then kept when in the range: as a plain semi-join the
				// planner could start from the range and probe
				// context_terms by item, a condition that is not a prefix
				// of its key (user, lexeme, item), so that each of the
				// range's items scanned all the user's terms (a search
				// walk: 0.9-4 s for a month's question of 250 items on a
				// database not analyzed yet; TestRangedRecallReadsTermsByLexeme).
				// Each row is then kept when its item is in the range, a
				// hashed subplan of the range's ids read once ("IS TRUE"
				// keeps the IN from being made a join): as a semi-join the
				// planner, expecting a range of one item, ran the fenced
				// read again for each item of the range (a plans walk:
				// 2.7 s for a month of 5,500 of a heavy user's 10,000
				// items, 18 ms once analyzed); a probe of the range per
				// row (EXISTS) took 8.5 s for a year of 10,000 items
				// whose words are in every item, this 74 ms.
				const agg = "FROM context_terms WHERE user_id = $1 AND lexeme = ANY((SELECT t FROM tm)::text[]) AND $2 <> '' AND NOT (SELECT phrase FROM kw)\n\t\tGROUP BY item_id)"
				if !strings.Contains(sql, agg) {
					panic("store: recallSQL has no " + agg)
				}
				sql = strings.Replace(sql, agg, "FROM (SELECT item_id, lexeme, question, answer FROM context_terms\n\t\t\tWHERE user_id = $1 AND lexeme = ANY((SELECT t FROM tm)::text[]) AND $2 <> '' AND NOT (SELECT phrase FROM kw) OFFSET 0) ct\n\t\tWHERE (item_id IN (SELECT id FROM context WHERE user_id = $1"+scope+cond+")) IS TRUE\n\t\tGROUP BY item_id)", 1)
				// The candidates are the range's (and the scope's): their
				// items are joined without the range, as an unranged
				// read's are. With it the planner, expecting a range of
				// one item (not analyzed, or a generic plan), read the
				// range's items and the candidates again for each (a
				// plans walk). A fence there instead cost the unranged
				// read 0.9 ms of its 2.4 at p50 (membench, LongMemEval).
				const join = "JOIN context c ON c.id = t.item_id AND c.user_id = $1{conds}"
				if !strings.Contains(sql, join) {
					panic("store: recallSQL has no " + join)
				}
				sql = strings.Replace(sql, join, "JOIN context c ON c.id = t.item_id AND c.user_id = $1", 1)
			}
		}
		if sh.ranged && !sh.latest && !sh.scoped {
			sql = rangedDFSQL(sql)
		}
		sql = strings.ReplaceAll(sql, "{conds}", scope+conds)
		sql = strings.ReplaceAll(sql, "{few}", strconv.Itoa(fewCandidates))
		m[sh] = sql
		if sh == (recallShape{}) {
			// The generation row tells PrunedRead's two reads whether an
			// item changed between them (an edit may move it from one
			// read's candidates to the other's, and out of both).
			m[recallShape{pruned: true}] = prunedSQL(sql) + generationSQL
			m[recallShape{rest: true}] = restSQL(sql) + generationSQL
		}
		if !sh.latest {
			m[recallShape{scoped: sh.scoped, ranged: sh.ranged, hybrid: true}] = hybridSQL(sql, scope+conds, n+1)
		}
	}
	for sh, sql := range m {
		m[sh] = withFirstFacts(sql)
	}
	return m
}()

// withFirstFacts numbers the facts' first keys ({core}) as sql's last
// parameter, after those of its shape.
func withFirstFacts(sql string) string {
	last := 0
	for _, p := range sqlParam.FindAllStringSubmatch(sql, -1) {
		n, _ := strconv.Atoi(p[1])
		last = max(last, n)
	}
	return strings.ReplaceAll(sql, "{core}", fmt.Sprintf("$%d::text[]", last+1))
}

var sqlParam = regexp.MustCompile(`\$([0-9]+)`)

// prunedSQL makes the plain recall statement sql a pruned one (Prune, $5
// the share and $6 the fewest items): st reads the statistics once, for
// the stats row and for keep; df counts each lexeme's items from
// context_terms (index-only, as cand reads them); keep is the lexemes not
// skipped, and whole says none was; cand then aggregates only the items
// holding a kept lexeme (a hashed semi-join, not evaluated when whole).
// The stats row's counts column carries each term's document frequency in
// the order of terms, negated for a skipped lexeme (NULL for a phrase
// query, whose candidates are not pruned, and for a user under the fewest
// items, whose read is then the plain one's: df reads nothing).
func prunedSQL(sql string) string {
	replace := func(old, new string) {
		if !strings.Contains(sql, old) {
			panic("store: recallSQL has no " + old)
		}
		sql = strings.Replace(sql, old, new, 1)
	}
	replace("\tcand AS MATERIALIZED (", `	st AS MATERIALIZED (SELECT count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq,
		greatest(avg(answer_len), 1)::float8 AS avga FROM context WHERE user_id = $1),
	df AS MATERIALIZED (SELECT lexeme, count(*)::int8 AS n FROM context_terms
		WHERE user_id = $1 AND lexeme = ANY((SELECT t FROM tm)::text[]) AND $2 <> '' AND NOT (SELECT phrase FROM kw)
			AND (SELECT n FROM st) >= $6 GROUP BY lexeme),
	keep AS MATERIALIZED (SELECT coalesce(array_agg(lexeme), '{}') AS k, count(*) = (SELECT count(*) FROM df) AS whole FROM df
		WHERE n <= $5 * (SELECT n FROM st) OR lexeme = (SELECT lexeme FROM df ORDER BY n, lexeme LIMIT 1)),
	cand AS MATERIALIZED (`)
	replace("AND NOT (SELECT phrase FROM kw)\n\t\tGROUP BY item_id)", `AND NOT (SELECT phrase FROM kw)
			AND ((SELECT whole FROM keep) OR item_id IN (SELECT item_id FROM context_terms
				WHERE user_id = $1 AND lexeme = ANY((SELECT k FROM keep)::text[])))
		GROUP BY item_id)`)
	replace(`count(*)::float8 AS n, greatest(avg(question_len), 1)::float8 AS avgq,
		greatest(avg(answer_len), 1)::float8 AS avga,`, `(SELECT n FROM st) AS n, (SELECT avgq FROM st) AS avgq, (SELECT avga FROM st) AS avga,`)
	replace("NULL::int8[] AS counts\n\tFROM context WHERE user_id = $1\n", `CASE WHEN $2 <> '' AND NOT (SELECT phrase FROM kw) AND (SELECT n FROM st) >= $6 THEN
			(SELECT array_agg(CASE WHEN d.lexeme IS NULL THEN 0 WHEN d.lexeme = ANY((SELECT k FROM keep)::text[]) THEN d.n ELSE -d.n END ORDER BY u.o)
			FROM unnest((SELECT t FROM tm)::text[]) WITH ORDINALITY u(l, o) LEFT JOIN df d ON d.lexeme = u.l) END AS counts
`)
	return sql
}

// rangedDFSQL makes a ranged recall statement sql return each term's
// document frequency among all the user's items (Candidates.DF), counted
// from context_terms (index-only), since cand holds the range's items
// alone: ranked by the range's items alone, a word looked rare in a narrow
// range, so a turn in it holding only the name of the person asked about
// outranked the turn that answered (a time walk: LoCoMo questions with a
// range and keywords, R@1 0.387 → 0.462). A phrase query gets no DF (its
// candidates are the phrase's matches, not every item holding a lexeme, so
// context_terms' counts are not what an unranged read ranks with); nor
// does a scoped read, whose frequencies would be the scope's (a join of
// every row of the terms to context). Both still rank with the range's.
func rangedDFSQL(sql string) string {
	const old = "NULL::int8[] AS counts\n\tFROM context WHERE user_id = $1"
	if !strings.Contains(sql, old) {
		panic("store: recallSQL has no " + old)
	}
	return strings.Replace(sql, old, `CASE WHEN $2 <> '' AND NOT (SELECT phrase FROM kw) THEN
			(SELECT array_agg(coalesce(d.n, 0) ORDER BY u.o)
			FROM unnest((SELECT t FROM tm)::text[]) WITH ORDINALITY u(l, o)
			LEFT JOIN (SELECT lexeme, count(*)::int8 AS n FROM context_terms
				WHERE user_id = $1 AND lexeme = ANY((SELECT t FROM tm)::text[]) GROUP BY lexeme) d ON d.lexeme = u.l) END AS counts
	FROM context WHERE user_id = $1`, 1)
}

// restSQL makes the plain recall statement sql the rest of a pruned one
// (Prune.Except, $5): its candidates are the items holding none of $5's
// lexemes (a hashed anti-join).
func restSQL(sql string) string {
	const old = "AND NOT (SELECT phrase FROM kw)\n\t\tGROUP BY item_id)"
	if !strings.Contains(sql, old) {
		panic("store: recallSQL has no " + old)
	}
	return strings.Replace(sql, old, `AND NOT (SELECT phrase FROM kw)
			AND item_id NOT IN (SELECT item_id FROM context_terms WHERE user_id = $1 AND lexeme = ANY($5::text[]))
		GROUP BY item_id)`, 1)
}

// fewCandidates is the most candidates whose texts recallSQL returns with
// them (Candidates.Texts): for so few, the texts cost less than the second
// round trip of ContextTexts (the synthetic corpus's ~15 short items); for
// more (a real conversation's hundreds of ~2 KB items) they cost more.
const fewCandidates = 32

// Row kinds of recallSQL.
const (
	rowStats      = 0
	rowFact       = 1
	rowCandidate  = 2
	rowGeneration = 3
	rowCounted    = 4 // a candidate with its stored term counts
)

// Candidates is what a search reads for ranking (package ranking, which
// store does not import, scores them): statistics over all the user's items,
// the query's lexemes, and every one of the user's items holding any of them.
type Candidates struct {
	// Terms are the query's distinct lexemes (under the user's text search
	// configuration), in the order of each Candidate's Terms.
	Terms []string
	// Stats are over all the user's items, matched or not.
	Stats ItemStats
	// Matches are the user's items holding any of Terms, in no particular
	// order (and, for a hybrid search, its VectorIDs). From Recall their
	// texts are empty unless Texts: ContextTexts reads those of the items
	// ranking keeps. SearchContext returns them with their texts.
	Matches []Candidate
	// Generation is the user's embedding generation (see UserVectors) when
	// the search was hybrid or pruned (SearchQuery.Prune), read in the
	// candidates' snapshot; 0 when the user has no row. It moves whenever
	// a vector of the user's is written or deleted, whenever an item's
	// text, scope or time changes, and whenever an item's lexemes change
	// (a re-index: SetLanguage, a migration; migrations/054).
	Generation int64
	// Texts says every one of Matches carries its texts (a Latest search,
	// or a query of few candidates: see fewCandidates), so ContextTexts
	// need not be called.
	Texts bool
	// DF is, from a pruned search (SearchQuery.Prune) of a user of at
	// least Prune.MinItems, or a ranged one (Since, Until) without a
	// phrase or a Scope, each of Terms' document frequency among the user's items
	// (the items holding it, read or in range or not); nil from any other
	// search, whose Matches are every item holding a term, so that they
	// give it.
	DF []int
	// Skipped, when not nil, marks the Terms a pruned search skipped:
	// Matches are then only the items holding a term not skipped, each with
	// the counts of all Terms. Nil when none was skipped.
	Skipped []bool
	// DocDefaults says the user has default document collections
	// (SetDefaultCollections), read in the same snapshot: when false, an
	// enrich naming no collections has no documents to search and skips
	// SearchChunks' round trip. Recall always reads it; SearchContext
	// leaves it false when it reads nothing (no usable keyword).
	DocDefaults bool
}

// ItemStats are what BM25F needs to know of all of a user's items. Its
// fields are ranking.Collection's, so that one converts to the other.
type ItemStats struct {
	// Items is the number of the user's items.
	Items int
	// AvgQuestionLen and AvgAnswerLen are the mean field lengths, in
	// distinct lexemes, over the user's items; at least 1.
	AvgQuestionLen, AvgAnswerLen float64
}

// Candidate is an item a search matched.
type Candidate struct {
	// Item is the context item, its Score zero; see Candidates.Matches for
	// when its texts are read.
	Item ContextItem
	// QuestionLen and AnswerLen are the fields' lengths in distinct lexemes.
	QuestionLen, AnswerLen int
	// Terms[t] counts Candidates.Terms[t] in the item.
	Terms []TermCount
}

// TermCount is how often one query lexeme occurs in one item, decoded from
// the item's tsvector: question words carry weight A there, answer words
// any other. Its fields are ranking.TermCount's, so that one converts to the
// other.
type TermCount struct {
	// Present says the item holds the lexeme, with or without positions.
	Present bool
	// Question and Answer count the lexeme's positions in each field (at
	// most 256 a lexeme in a tsvector). 32 bits, not 64: a heavy user's
	// recall holds one per candidate and query lexeme (about 100,000).
	Question, Answer int32
}

// span is a slice of an arena, by offsets so the arena can grow.
type span struct{ start, end int }

func (sp span) of(arena []byte) []byte { return arena[sp.start:sp.end] }

func (sp span) in(s string) string { return s[sp.start:sp.end] }

// push appends b to the arena and returns its span.
func push(arena *[]byte, b []byte) span {
	start := len(*arena)
	*arena = append(*arena, b...)
	return span{start, len(*arena)}
}

// RecallQuery is what enrich reads: a search plus the user's facts.
type RecallQuery struct {
	SearchQuery
	// MaxFacts caps the facts returned (most recently set first). Must be
	// at least 1.
	MaxFacts int
	// FirstFacts are keys whose facts are read before the others, whatever
	// their age, so that the cap never leaves them out (enrich's core
	// facts: a user's name, set first, was the first left out once they had
	// more than MaxFacts facts). The facts returned are still ordered by
	// time.
	FirstFacts []string
}

// SearchContext returns the user's context items holding any keyword's
// lexeme, with their texts and what ranking them needs (see Candidates). It
// never fails because of the keywords' content. The texts are a second read
// (ContextTexts) of every candidate: a caller that ranks first and needs
// only a few texts uses Recall.
func (s *Store) SearchContext(ctx context.Context, q SearchQuery) (Candidates, error) {
	_, c, err := s.recall(ctx, q, 0, nil)
	if err != nil {
		return Candidates{}, fmt.Errorf("search context: %w", err)
	}
	if c.Texts {
		return c, nil
	}
	items := make([]ContextItem, len(c.Matches))
	for i, m := range c.Matches {
		items[i] = m.Item
	}
	if items, err = s.ContextTexts(ctx, q.UserID, items); err != nil {
		return Candidates{}, fmt.Errorf("search context: %w", err)
	}
	// ContextTexts keeps the order and leaves out only items gone since.
	kept := c.Matches[:0]
	for _, m := range c.Matches {
		if len(items) > 0 && items[0].ID == m.Item.ID {
			m.Item, items = items[0], items[1:]
			kept = append(kept, m)
		}
	}
	c.Matches, c.Texts = kept, true
	return c, nil
}

// SearchCandidates returns what SearchContext does but the texts (unless
// the candidates are few: Candidates.Texts), from one statement: a caller
// that ranks first reads the texts of the items it keeps (ContextTexts),
// as enrich does, rather than every candidate's. Prune applies as in
// Recall.
func (s *Store) SearchCandidates(ctx context.Context, q SearchQuery) (Candidates, error) {
	_, c, err := s.recall(ctx, q, 0, nil)
	if err != nil {
		return Candidates{}, fmt.Errorf("search candidates: %w", err)
	}
	return c, nil
}

// Recall returns the user's facts (at most q.MaxFacts: those of
// q.FirstFacts' keys, then the most recently set; returned most recently
// set first) and the candidates SearchContext would return, without their
// texts, from one statement: one round trip to Postgres and one snapshot, so
// a reply never shows a turn's context without the facts committed with it.
// ContextTexts then reads the texts of the items ranking keeps.
func (s *Store) Recall(ctx context.Context, q RecallQuery) ([]Fact, Candidates, error) {
	if q.MaxFacts < 1 {
		return nil, Candidates{}, fmt.Errorf("recall: max facts %d is under 1", q.MaxFacts)
	}
	facts, c, err := s.recall(ctx, q.SearchQuery, q.MaxFacts, q.FirstFacts)
	if err != nil {
		return nil, Candidates{}, fmt.Errorf("recall: %w", err)
	}
	return facts, c, nil
}

// recall runs recallSQL and decodes its candidates. facts is never nil.
func (s *Store) recall(ctx context.Context, q SearchQuery, maxFacts int, firstFacts []string) ([]Fact, Candidates, error) {
	tsq, terms := tsQuery(q.Keywords)
	sh := recallShape{scoped: q.Scope != "", ranged: q.ranged()}
	sh.latest = sh.ranged && tsq == "" && q.Latest > 0
	sh.hybrid = q.Hybrid && !sh.latest
	if q.pruned() {
		if !(q.Prune.Share < 1) || q.Prune.MinItems < 0 {
			return nil, Candidates{}, fmt.Errorf("prune share %v is not under 1 or its fewest items %d is negative", q.Prune.Share, q.Prune.MinItems)
		}
		sh.pruned, sh.rest = len(q.Prune.Except) == 0, len(q.Prune.Except) > 0
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return nil, Candidates{}, fmt.Errorf("since %s is not before until %s", q.Since.Format(time.RFC3339Nano), q.Until.Format(time.RFC3339Nano))
	}
	if q.Latest < 0 {
		return nil, Candidates{}, fmt.Errorf("latest %d is negative", q.Latest)
	}
	if tsq == "" && maxFacts == 0 && !sh.latest && !sh.hybrid {
		return []Fact{}, Candidates{}, nil // nothing to read: no round trip
	}
	args := []any{q.UserID, tsq, maxFacts, terms}
	if sh.scoped {
		args = append(args, q.Scope)
	}
	if sh.ranged {
		args = append(args, bound(q.Since, pgtype.NegativeInfinity), bound(q.Until, pgtype.Infinity))
	}
	if sh.latest {
		args = append(args, q.Latest)
	}
	if sh.pruned {
		args = append(args, q.Prune.Share, q.Prune.MinItems)
	}
	if sh.rest {
		args = append(args, q.Prune.Except)
	}
	if sh.hybrid {
		ids := q.VectorIDs
		if ids == nil {
			ids = []int64{}
		}
		args = append(args, ids)
	}
	if firstFacts == nil {
		firstFacts = []string{}
	}
	args = append(args, firstFacts)
	sql := recallStatements[sh]
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, Candidates{}, err
	}
	defer rows.Close()
	var (
		kind                int16
		out                 Candidates
		qlen, alen          float64
		facts               = []Fact{}
		f                   Fact
		c                   Candidate
		cr                  candidateReader
		q1, a1, ev, conv, v pgtype.DriverBytes // valid until the next row: copied by cr
		withTexts           *float64           // a candidate's: 1 when the row has its texts
		allTexts            = true
		n                   float64
		defaults            int64
		sawStats            bool
		df                  []int64 // a pruned search's, negated when skipped
	)
	// Each kind of row scans its own columns; nil skips the others.
	statsDest := []any{nil, &n, &out.Stats.AvgQuestionLen, &out.Stats.AvgAnswerLen, &out.Terms, &defaults, nil, nil, nil, nil, nil, nil, nil, nil, nil, &df}
	factDest := []any{nil, nil, nil, nil, nil, nil, &f.Key, &f.Value, &f.SourceAt, &f.UpdatedAt, &f.EventID, &f.ConversationID, nil, nil, nil, nil}
	candDest := []any{nil, &withTexts, nil, nil, nil, &c.Item.ID, &q1, &a1, &c.Item.CreatedAt, nil, &ev, &conv, &qlen, &alen, &v, nil}
	kindDest := make([]any, len(candDest))
	kindDest[0] = &kind
	for rows.Next() {
		if err := rows.Scan(kindDest...); err != nil {
			return nil, Candidates{}, err
		}
		switch kind {
		case rowStats:
			err = rows.Scan(statsDest...)
			out.Stats.Items = int(n)
			out.DocDefaults = defaults > 0
			cr.setTerms(out.Terms)
			sawStats = true
		case rowFact:
			if err = rows.Scan(factDest...); err == nil {
				f.UserID = q.UserID
				facts = append(facts, f)
			}
		case rowCandidate, rowCounted:
			if err = rows.Scan(candDest...); err == nil {
				c.QuestionLen, c.AnswerLen = int(qlen), int(alen)
				allTexts = allTexts && withTexts != nil
				if kind == rowCounted {
					// The int8[]'s bytes as they came (binary): pgx would
					// scan them into a slice per row.
					v = rows.RawValues()[15]
				}
				cr.add(c, q1, a1, ev, conv, v, kind == rowCounted)
			}
		case rowGeneration:
			err = rows.Scan(nil, nil, nil, nil, nil, &out.Generation, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil)
		default:
			err = fmt.Errorf("recall read a row of kind %d", kind)
		}
		if err != nil {
			return nil, Candidates{}, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, Candidates{}, err
	}
	if !sawStats {
		return nil, Candidates{}, errors.New("recall read no statistics row")
	}
	if df != nil {
		if len(df) != len(out.Terms) {
			return nil, Candidates{}, fmt.Errorf("recall read %d document frequencies for %d terms", len(df), len(out.Terms))
		}
		out.DF = make([]int, len(df))
		for t, d := range df {
			out.DF[t] = int(max(d, -d))
			if d < 0 {
				if out.Skipped == nil {
					out.Skipped = make([]bool, len(df))
				}
				out.Skipped[t] = true
			}
		}
	}
	// Facts come in the statement's order; a stable sort on the time alone
	// keeps it (ties by key, in the database's collation) and guarantees
	// the most recent first.
	slices.SortStableFunc(facts, func(x, y Fact) int { return y.SourceAt.Compare(x.SourceAt) })

	out.Matches = cr.decode(q.UserID)
	out.Texts = allTexts
	if sh.hybrid && len(q.VectorIDs) > 0 {
		out.Matches = dedupVectorIDs(out.Matches, q.VectorIDs)
	}
	return facts, out, nil
}

// dedupVectorIDs drops the second row of a vector id the keywords matched
// too (see vectorCandidatesSQL).
func dedupVectorIDs(ms []Candidate, ids []int64) []Candidate {
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		seen[id] = false
	}
	kept := ms[:0]
	for _, m := range ms {
		if s, ok := seen[m.Item.ID]; ok {
			if s {
				continue
			}
			seen[m.Item.ID] = true
		}
		kept = append(kept, m)
	}
	return kept
}

// bound is a range's end for Postgres: t, or inf when t is zero (open).
// Postgres keeps microseconds, and pgx truncates a finer t: an until 1 ns
// after an item came down to the item's time and left it out of [since,
// until), a since 400 ns after one down to it and let it in. Rounded up to
// the microsecond, both ends hold exactly the items inside them (an
// item's time has microseconds only).
func bound(t time.Time, inf pgtype.InfinityModifier) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
	}
	if u := t.Truncate(time.Microsecond); u.Before(t) {
		t = u.Add(time.Microsecond)
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// candidateReader collects a recall's candidates, row by row. A row's bytes
// are valid until the next row only, so its texts are copied into an arena
// that becomes one string every candidate's strings slice (n candidates
// cost a handful of allocations rather than 4n), and its tsvector is decoded
// at once into term counts; one that arrives before the statistics row (and
// so before the query's lexemes) is copied and decoded when they come.
//
// The rows and their term counts are kept in chunks, each twice the last
// (a new one when the last is full, never one grown by copying), and the
// candidates are copied once, into a slice of their number, at the end:
// arrays grown by copying as rows came were most of a heavy user's recall
// in Go (a profile of a 6,972-item user: 68% of Recall's CPU, in copies,
// zeroing and fresh pages, for up to 3 MB of counts;
// BenchmarkCandidateReader).
type candidateReader struct {
	terms   []string // the query's lexemes, once known
	known   bool     // terms is set
	rows    [][]rawCandidate
	n       int    // rows read
	texts   []byte // arena of the candidates' texts
	vectors []byte // arena of the tsvectors read before the terms
	// counts is the chunk the next candidates' term counts are cut from
	// (len(terms) each), and countsOf how many candidates' counts it was
	// made for.
	counts   []TermCount
	countsOf int
	tc       termCounts
	deferred int // candidates whose tsvector waits in vectors: the first ones
}

// Candidates per chunk of candidateReader's rows and counts: the first
// chunk's, doubling to the last's.
const (
	firstCandidateChunk = 64
	maxCandidateChunk   = 4096
)

// nextChunk is the size of the chunk that follows one of last candidates
// (0: none yet).
func nextChunk(last int) int { return min(max(2*last, firstCandidateChunk), maxCandidateChunk) }

type rawCandidate struct {
	c       Candidate // without its texts and user id; Terms once decoded
	texts   [4]span   // question, answer, event id, conversation id, in texts
	vector  span      // the tsvector's text form (or the counts), in vectors, until decoded
	counted bool      // vector holds stored counts (rowCounted), not a tsvector
	bad     bool      // the tsvector or counts did not read
}

// setTerms gives the query's lexemes and decodes the tsvectors that came
// before them.
func (cr *candidateReader) setTerms(terms []string) {
	cr.terms, cr.known = terms, true
	left := cr.deferred
	for _, chunk := range cr.rows {
		for i := range chunk[:min(left, len(chunk))] {
			r := &chunk[i]
			cr.decodeVector(r, r.vector.of(cr.vectors))
		}
		left -= min(left, len(chunk))
	}
	cr.vectors = nil
}

// decodeVector sets r's term counts from v: a tsvector's text, or stored
// counts when r.counted.
func (cr *candidateReader) decodeVector(r *rawCandidate, v []byte) {
	nt, n := len(cr.terms), len(cr.counts)
	if cap(cr.counts)-n < nt {
		cr.countsOf = nextChunk(cr.countsOf)
		cr.counts, n = make([]TermCount, 0, cr.countsOf*nt), 0
	}
	cr.counts = cr.counts[:n+nt]
	r.c.Terms = cr.counts[n : n+nt : n+nt]
	if r.counted {
		r.bad = readStoredCounts(v, r.c.Terms) != nil
		return
	}
	r.bad = cr.tc.read(v, cr.terms, r.c.Terms) != nil
}

// add reads one candidate row: c without its texts and term counts, and
// the row's bytes for those (vector holds stored counts when counted).
func (cr *candidateReader) add(c Candidate, question, answer, eventID, conversationID, vector []byte, counted bool) {
	last := len(cr.rows) - 1
	if last < 0 || len(cr.rows[last]) == cap(cr.rows[last]) {
		size := firstCandidateChunk
		if last >= 0 {
			size = nextChunk(cap(cr.rows[last]))
		}
		cr.rows = append(cr.rows, make([]rawCandidate, 0, size))
		last++
	}
	t := &cr.texts
	cr.rows[last] = append(cr.rows[last], rawCandidate{c: c,
		texts: [4]span{push(t, question), push(t, answer), push(t, eventID), push(t, conversationID)}, counted: counted})
	cr.n++
	r := &cr.rows[last][len(cr.rows[last])-1]
	if cr.known {
		cr.decodeVector(r, vector)
	} else {
		r.vector = push(&cr.vectors, vector)
		cr.deferred++
	}
}

// decode returns the candidates read, with their texts, user id and term
// counts. A candidate whose tsvector cannot be read is left out rather than
// failing the search; Postgres' own output always reads.
func (cr *candidateReader) decode(userID string) []Candidate {
	if !cr.known {
		return nil // no counts to give; recall fails without the statistics row
	}
	// The arena is not written again: its bytes can be the string's.
	text := unsafe.String(unsafe.SliceData(cr.texts), len(cr.texts))
	kept := make([]Candidate, 0, cr.n)
	for _, chunk := range cr.rows {
		for i := range chunk {
			r := &chunk[i]
			if r.bad {
				continue
			}
			m := r.c
			m.Item.UserID = userID
			m.Item.Question, m.Item.Answer = r.texts[0].in(text), r.texts[1].in(text)
			m.Item.EventID, m.Item.ConversationID = r.texts[2].in(text), r.texts[3].in(text)
			kept = append(kept, m)
		}
	}
	return kept
}

// StopWords returns those of words that the user's text search
// configuration (SetLanguage; English when none is set) searches for
// nothing: its stop words ("und", "que", "что" for a German, Spanish or
// Russian user), which Postgres drops when it parses a query. One read,
// of no table but user_languages. The caller leaves them out before it
// caps a long message's keywords (enricher.Keywords), so that the user's
// grammar does not take the places of the message's subject.
func (s *Store) StopWords(ctx context.Context, userID string, words []string) (map[string]bool, error) {
	rows, err := s.db.Query(ctx, `
		SELECT w FROM unnest($2::text[]) AS w,
			(SELECT coalesce((SELECT ts_config FROM user_languages WHERE user_id = $1), 'english') AS c) cfg
		WHERE cardinality(memoryd_query_terms(cfg.c, w)) = 0`, userID, words)
	if err != nil {
		return nil, fmt.Errorf("stop words: %w", err)
	}
	stops, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("stop words: %w", err)
	}
	out := make(map[string]bool, len(stops))
	for _, w := range stops {
		out[w] = true
	}
	return out, nil
}
