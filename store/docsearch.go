package store

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// ChunkQuery selects the candidates of a search over document chunks.
type ChunkQuery struct {
	// Reader is who searches, as the subject says: a user reads the user's
	// own collections and the shared collections of the scopes the user
	// was granted (GrantReader); a shared scope reads its own.
	Reader Owner
	// Collections names the collections searched: a name for the reader's
	// own, "scope/name" for a granted shared scope's (from a user). Empty:
	// every collection the reader may read. A name the reader may not read,
	// or that does not exist, is ErrNoCollection.
	Collections []string
	// Keywords are ORed, as SearchQuery's; any text is safe.
	Keywords []string
	// Defaults, with no Collections, searches the reader's default
	// collections (SetDefaultCollections) instead of every readable one:
	// those the reader may still read (a revoked grant's are skipped, not
	// an error); none set, none searched. Only a user has defaults.
	Defaults bool
}

// ChunkHit is a chunk a search found, with what a citation needs.
type ChunkHit struct {
	// Collection is the collection's reference as the reader names it
	// (Collection.Ref).
	Collection  string
	DocumentID  string
	Source      string
	HeadingPath []string
	ChunkIndex  int
	Text        string
	// Start and End are the chunk's byte offsets in the document.
	Start, End int
	// Score is the ranking's score, 0..1 (set by the caller that ranks).
	Score float64
}

// ChunkCandidate is a chunk a search matched, with what ranking needs (its
// Hit has no Text yet): the
// heading path is BM25F's first field (ranking's "question"), the text the
// second ("answer").
type ChunkCandidate struct {
	Hit                 ChunkHit
	HeadingLen, TextLen int
	// Terms[t] counts ChunkCandidates.Terms[t]: Question in the heading
	// path, Answer in the text.
	Terms []TermCount
}

// ChunkCandidates is what a chunk search reads for ranking (a
// ChunkRanker's input).
type ChunkCandidates struct {
	// Terms are the query's distinct lexemes under the searched
	// collections' configurations.
	Terms []string
	// Stats are over all the chunks of the searched collections:
	// AvgQuestionLen is the heading paths' mean length, AvgAnswerLen the
	// texts'.
	Stats ItemStats
	// Matches are the chunks holding any of Terms, in no particular order.
	Matches []ChunkCandidate
}

// readable returns the collections q may search.
func (s *Store) readable(ctx context.Context, q ChunkQuery) ([]Collection, error) {
	kind, reader, err := q.Reader.kind()
	if err != nil {
		return nil, err
	}
	// A user reads the user's own collections and granted scopes'; a scope
	// reads its own.
	rows, err := s.db.Query(ctx, `
		SELECT c.id, c.owner_kind, c.owner, c.name, c.chunk_tokens, c.overlap_tokens, c.ts_config
		FROM collections c
		WHERE (c.owner_kind = $1 AND c.owner = $2)
		   OR ($1 = 'user' AND c.owner_kind = 'shared'
		       AND c.owner IN (SELECT scope FROM collection_readers WHERE user_id = $2))
		ORDER BY c.id`, kind, reader)
	if err != nil {
		return nil, err
	}
	var all []Collection
	var c Collection
	var ck, co string
	_, err = pgx.ForEachRow(rows, []any{&c.ID, &ck, &co, &c.Name, &c.ChunkTokens, &c.OverlapTokens, &c.TSConfig}, func() error {
		c.Owner = Owner{}
		if ck == "user" {
			c.Owner.User = co
		} else {
			c.Owner.Shared = co
		}
		all = append(all, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(q.Collections) == 0 && q.Defaults {
		return s.defaults(ctx, reader, kind, all)
	}
	if len(q.Collections) == 0 {
		return all, nil
	}
	var out []Collection
	for _, name := range q.Collections {
		i := slices.IndexFunc(all, func(c Collection) bool { return c.Ref(q.Reader) == name })
		if i < 0 {
			return nil, &NoCollectionError{Name: name}
		}
		if !slices.ContainsFunc(out, func(c Collection) bool { return c.ID == all[i].ID }) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// defaults returns the user's default collections among all, the
// readable ones, in the order they were set.
func (s *Store) defaults(ctx context.Context, user, kind string, all []Collection) ([]Collection, error) {
	if kind != "user" {
		return nil, nil
	}
	ids, err := s.defaultIDs(ctx, user)
	if err != nil {
		return nil, err
	}
	var out []Collection
	for _, id := range ids {
		if i := slices.IndexFunc(all, func(c Collection) bool { return c.ID == id }); i >= 0 {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// defaultIDs returns the ids of the user's default collections, in order.
func (s *Store) defaultIDs(ctx context.Context, user string) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT collection_id FROM doc_defaults WHERE user_id = $1 ORDER BY position`, user)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// SetDefaultCollections replaces the user's default collections with
// names (as ChunkQuery.Collections names them; empty clears them), in one
// transaction, and returns them as set (duplicates dropped). A name the
// user may not read, or that does not exist, is ErrNoCollection and
// changes nothing.
func (s *Store) SetDefaultCollections(ctx context.Context, user string, names []string) ([]string, error) {
	reader := Owner{User: user}
	out := []string{}
	err := s.inTx(ctx, func(q *Store) error {
		// The user's settings one after the other, before any other lock:
		// the delete below sees no row another setting has not committed,
		// and two settings of a user without defaults then inserted the
		// same rows (23505), or waited each for a row the other inserted
		// (40P01).
		if _, err := q.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('memoryd.doc_defaults.' || current_schema()), hashtext($1))`, user); err != nil {
			return err
		}
		var cols []Collection
		if len(names) > 0 {
			var err error
			if cols, err = q.readable(ctx, ChunkQuery{Reader: reader, Collections: names}); err != nil {
				return err
			}
		} else if _, _, err := reader.kind(); err != nil {
			return err
		}
		ids := make([]int64, len(cols))
		for i, c := range cols {
			ids[i] = c.ID
			out = append(out, c.Ref(reader))
		}
		// The collections first, in id order (KEY SHARE, as the insert's
		// foreign key checks take them), before the user's defaults: a
		// forget locks the collections in id order and then deletes their
		// defaults by its cascade. Locked by those checks, in the order
		// named and after the defaults' delete, the two deadlocked.
		rows, err := q.db.Query(ctx, `SELECT id FROM collections WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, ids)
		if err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, c := range cols {
			if !slices.Contains(locked, c.ID) {
				return &NoCollectionError{Name: c.Ref(reader)} // deleted since read
			}
		}
		if err := q.deleteDefaultsOf(ctx, user); err != nil {
			return err
		}
		_, err = q.db.Exec(ctx, `INSERT INTO doc_defaults (user_id, collection_id, position)
			SELECT $1, c, n FROM unnest($2::bigint[]) WITH ORDINALITY AS u(c, n)`, user, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set default collections: %w", err)
	}
	return out, nil
}

// DefaultCollections returns the user's default collections that the user
// may read, in the order set.
func (s *Store) DefaultCollections(ctx context.Context, user string) ([]string, error) {
	reader := Owner{User: user}
	cols, err := s.readable(ctx, ChunkQuery{Reader: reader, Defaults: true})
	if err != nil {
		return nil, fmt.Errorf("default collections: %w", err)
	}
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Ref(reader)
	}
	return out, nil
}

// Collections returns the collections the reader may read (see ChunkQuery).
func (s *Store) Collections(ctx context.Context, reader Owner) ([]Collection, error) {
	cs, err := s.readable(ctx, ChunkQuery{Reader: reader})
	if err != nil {
		return nil, fmt.Errorf("collections: %w", err)
	}
	return cs, nil
}

// chunkStatsSQL reads the statistics over the searched collections' chunks,
// the query's lexemes under each of their configurations, and whether the
// query holds a phrase under any of them (a keyword the parser splits into
// several words, e.g. a CJK run or "e-mail").
const chunkStatsSQL = `
	SELECT count(*)::float8, greatest(avg(heading_len), 1)::float8, greatest(avg(text_len), 1)::float8,
		(SELECT coalesce(array_agg(DISTINCT t), '{}') FROM unnest($2::text[]) cfg, unnest(memoryd_query_terms(cfg, $3)) t),
		(SELECT coalesce(bool_or(strpos(memoryd_tsquery(cfg, $4)::text, '<') > 0), false) FROM unnest($2::text[]) cfg)
	FROM doc_chunks WHERE collection_id = ANY($1)`

// chunkTermsSQL reads the candidates of a query that is an OR of lexemes
// (no phrase) from chunk_terms (migrations/027): only the rows of the
// query's lexemes ($4, all configurations' terms) in the searched
// collections ($1), from chunk_terms' primary key (index-only once the
// table is vacuumed), aggregated per chunk as an int8[] of packed
// term<<32 | heading<<16 | body counts (term: the lexeme's 1-based index
// in $4; readStoredCounts reads it, as the recall's), then each
// chunk's place and lengths by its id. A chunk is a candidate when it holds
// one of the lexemes of its own collection's configuration ($2, in $1's
// order): exactly when its vector matches that configuration's tsquery, as
// chunkVectorsSQL reads them. No vector is read.
const chunkTermsSQL = `
	WITH own AS MATERIALIZED (SELECT c, memoryd_query_terms(cfg, $3) AS t FROM unnest($1::bigint[], $2::text[]) AS u(c, cfg)),
	cand AS MATERIALIZED (SELECT ct.chunk_id,
			array_agg((array_position($4::text[], ct.lexeme)::int8 << 32) | (ct.heading::int8 << 16) | ct.body::int8) AS counts
		FROM own JOIN chunk_terms ct ON ct.collection_id = own.c AND ct.lexeme = ANY($4::text[])
		GROUP BY ct.chunk_id
		HAVING bool_or(ct.lexeme = ANY(own.t)))
	SELECT ch.collection_id, ch.doc_id, d.source, ch.chunk_index, ch.heading_path, ch.byte_start, ch.byte_end,
		ch.heading_len, ch.text_len, cand.counts::text
	FROM cand JOIN doc_chunks ch ON ch.id = cand.chunk_id
	JOIN documents d ON d.collection_id = ch.collection_id AND d.doc_id = ch.doc_id`

// chunkVectorsSQL reads the matching chunks of a phrase query, each under
// its own configuration's parse of the query, with their documents'
// sources, and what ranking needs (lengths and the search vector, whose
// counts are decoded in Go: see termCounts) but not their text: ranking
// reads every match, and the text is most of a chunk's bytes.
const chunkVectorsSQL = `
	WITH kw AS MATERIALIZED (SELECT cfg, memoryd_tsquery(cfg, $3) AS q FROM unnest($2::text[]) cfg)
	SELECT ch.collection_id, ch.doc_id, d.source, ch.chunk_index, ch.heading_path, ch.byte_start, ch.byte_end,
		ch.heading_len, ch.text_len, ch.search::text
	FROM doc_chunks ch JOIN kw ON kw.cfg = ch.ts_config
	JOIN documents d ON d.collection_id = ch.collection_id AND d.doc_id = ch.doc_id
	WHERE ch.collection_id = ANY($1) AND ch.search @@ kw.q`

// chunkTextsSQL reads the text of the chunks kept, in the order given.
const chunkTextsSQL = `
	SELECT ch.text
	FROM unnest($1::bigint[], $2::text[], $3::int[]) WITH ORDINALITY AS u(c, d, i, n)
	JOIN doc_chunks ch ON ch.collection_id = u.c AND ch.doc_id = u.d AND ch.chunk_index = u.i
	ORDER BY u.n`

// ChunkRanker ranks a chunk search's candidates: it returns the hits of
// the matches it keeps (c.Matches[i].Hit, Score set), best first. Their
// Text is empty: SearchChunks reads it for the kept hits only.
type ChunkRanker func(c ChunkCandidates) []ChunkHit

// SearchChunks returns the chunks of the collections q names holding any
// keyword's lexeme, as rank keeps and orders them, with their text. It
// reads the candidates (what ranking needs, no text), ranks them, then
// reads the text of the kept ones, all in one snapshot, so that a document
// being replaced is seen whole, old or new. It never fails because of the
// keywords' content; a collection the reader may not read is
// ErrNoCollection.
func (s *Store) SearchChunks(ctx context.Context, q ChunkQuery, rank ChunkRanker) ([]ChunkHit, error) {
	var hits []ChunkHit
	err := s.snapshot(ctx, func(r *Store) error {
		c, ids, err := r.chunkCandidates(ctx, q)
		if err != nil {
			return err
		}
		hits = rank(c)
		return r.readChunkTexts(ctx, hits, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	if hits == nil {
		hits = []ChunkHit{}
	}
	return hits, nil
}

// chunkCandidates reads a search's candidates, and the ids of the searched
// collections by reference.
func (s *Store) chunkCandidates(ctx context.Context, q ChunkQuery) (ChunkCandidates, map[string]int64, error) {
	cols, err := s.readable(ctx, q)
	if err != nil {
		return ChunkCandidates{}, nil, err
	}
	tsq, terms := tsQuery(q.Keywords)
	out := ChunkCandidates{Terms: []string{}, Matches: []ChunkCandidate{}}
	if tsq == "" || len(cols) == 0 {
		return out, nil, nil
	}
	ids := make([]int64, len(cols))
	var cfgs []string
	refs := make(map[int64]string, len(cols))
	byRef := make(map[string]int64, len(cols))
	for i, c := range cols {
		ids[i] = c.ID
		refs[c.ID] = c.Ref(q.Reader)
		byRef[refs[c.ID]] = c.ID
		if !slices.Contains(cfgs, c.TSConfig) {
			cfgs = append(cfgs, c.TSConfig)
		}
	}
	var (
		n      float64
		phrase bool
	)
	if err := s.db.QueryRow(ctx, chunkStatsSQL, ids, cfgs, terms, tsq).
		Scan(&n, &out.Stats.AvgQuestionLen, &out.Stats.AvgAnswerLen, &out.Terms, &phrase); err != nil {
		return ChunkCandidates{}, nil, fmt.Errorf("stats: %w", err)
	}
	out.Stats.Items = int(n)
	var rows pgx.Rows
	fromTerms := !phrase && !chunkVectorsOnly(ctx)
	if fromTerms {
		if len(out.Terms) == 0 {
			return out, byRef, nil // nothing to match: no round trip
		}
		colCfgs := make([]string, len(cols))
		for i, c := range cols {
			colCfgs[i] = c.TSConfig
		}
		rows, err = s.db.Query(ctx, chunkTermsSQL, ids, colCfgs, terms, out.Terms)
	} else {
		rows, err = s.db.Query(ctx, chunkVectorsSQL, ids, cfgs, tsq)
	}
	if err != nil {
		return ChunkCandidates{}, nil, err
	}
	var (
		tc     termCounts
		c      ChunkCandidate
		colID  int64
		counts []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&colID, &c.Hit.DocumentID, &c.Hit.Source, &c.Hit.ChunkIndex, &c.Hit.HeadingPath,
		&c.Hit.Start, &c.Hit.End, &c.HeadingLen, &c.TextLen, &counts}, func() error {
		c.Hit.Collection = refs[colID]
		c.Terms = make([]TermCount, len(out.Terms))
		var err error
		if fromTerms {
			err = readStoredCounts(counts, c.Terms)
		} else {
			err = tc.read(counts, out.Terms, c.Terms)
		}
		if err != nil {
			return err
		}
		if c.Hit.HeadingPath == nil {
			c.Hit.HeadingPath = []string{}
		}
		out.Matches = append(out.Matches, c)
		c = ChunkCandidate{}
		return nil
	})
	if err != nil {
		return ChunkCandidates{}, nil, err
	}
	return out, byRef, nil
}

// chunkVectorsKey, in a context, makes chunk searches read every query's
// candidates from the vectors, as phrase queries do (tests compare the two
// paths).
type chunkVectorsKey struct{}

func chunkVectorsOnly(ctx context.Context) bool {
	v, _ := ctx.Value(chunkVectorsKey{}).(bool)
	return v
}

// HeadingText joins a heading path as the index does ("A > B").
func HeadingText(path []string) string { return strings.Join(path, " > ") }
