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

// ChunkCandidate is a chunk a search matched, with what ranking needs: the
// heading path is BM25F's first field (ranking's "question"), the text the
// second ("answer").
type ChunkCandidate struct {
	Hit                 ChunkHit
	HeadingLen, TextLen int
	// Terms[t] counts ChunkCandidates.Terms[t]: Question in the heading
	// path, Answer in the text.
	Terms []TermCount
}

// ChunkCandidates is what a chunk search reads for ranking.
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
	if len(q.Collections) == 0 {
		return all, nil
	}
	var out []Collection
	for _, name := range q.Collections {
		i := slices.IndexFunc(all, func(c Collection) bool { return c.Ref(q.Reader) == name })
		if i < 0 {
			return nil, fmt.Errorf("collection %q: %w", name, ErrNoCollection)
		}
		if !slices.ContainsFunc(out, func(c Collection) bool { return c.ID == all[i].ID }) {
			out = append(out, all[i])
		}
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

// chunkStatsSQL reads the statistics over the searched collections' chunks
// and the query's lexemes under each of their configurations.
const chunkStatsSQL = `
	SELECT count(*)::float8, greatest(avg(heading_len), 1)::float8, greatest(avg(text_len), 1)::float8,
		(SELECT coalesce(array_agg(DISTINCT t), '{}') FROM unnest($2::text[]) cfg, unnest(memoryd_query_terms(cfg, $3)) t)
	FROM doc_chunks WHERE collection_id = ANY($1)`

// chunkCandidatesSQL reads the matching chunks, each under its own
// configuration's parse of the query, with their documents' sources: one
// statement, so one snapshot, so a document being replaced is seen whole,
// old or new.
const chunkCandidatesSQL = `
	WITH kw AS MATERIALIZED (SELECT cfg, memoryd_tsquery(cfg, $3) AS q FROM unnest($2::text[]) cfg)
	SELECT ch.collection_id, ch.doc_id, d.source, ch.chunk_index, ch.heading_path, ch.text, ch.byte_start, ch.byte_end,
		ch.heading_len, ch.text_len, ch.search::text
	FROM doc_chunks ch JOIN kw ON kw.cfg = ch.ts_config
	JOIN documents d ON d.collection_id = ch.collection_id AND d.doc_id = ch.doc_id
	WHERE ch.collection_id = ANY($1) AND ch.search @@ kw.q`

// SearchChunks returns the chunks of the collections q names holding any
// keyword's lexeme, with what ranking them needs. It never fails because of
// the keywords' content; a collection the reader may not read is
// ErrNoCollection.
func (s *Store) SearchChunks(ctx context.Context, q ChunkQuery) (ChunkCandidates, error) {
	cols, err := s.readable(ctx, q)
	if err != nil {
		return ChunkCandidates{}, fmt.Errorf("search chunks: %w", err)
	}
	tsq, terms := tsQuery(q.Keywords)
	out := ChunkCandidates{Terms: []string{}, Matches: []ChunkCandidate{}}
	if tsq == "" || len(cols) == 0 {
		return out, nil
	}
	ids := make([]int64, len(cols))
	var cfgs []string
	refs := make(map[int64]string, len(cols))
	for i, c := range cols {
		ids[i] = c.ID
		refs[c.ID] = c.Ref(q.Reader)
		if !slices.Contains(cfgs, c.TSConfig) {
			cfgs = append(cfgs, c.TSConfig)
		}
	}
	var n float64
	if err := s.db.QueryRow(ctx, chunkStatsSQL, ids, cfgs, terms).
		Scan(&n, &out.Stats.AvgQuestionLen, &out.Stats.AvgAnswerLen, &out.Terms); err != nil {
		return ChunkCandidates{}, fmt.Errorf("search chunks: stats: %w", err)
	}
	out.Stats.Items = int(n)
	rows, err := s.db.Query(ctx, chunkCandidatesSQL, ids, cfgs, tsq)
	if err != nil {
		return ChunkCandidates{}, fmt.Errorf("search chunks: %w", err)
	}
	var (
		tc     termCounts
		c      ChunkCandidate
		colID  int64
		vector []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&colID, &c.Hit.DocumentID, &c.Hit.Source, &c.Hit.ChunkIndex, &c.Hit.HeadingPath,
		&c.Hit.Text, &c.Hit.Start, &c.Hit.End, &c.HeadingLen, &c.TextLen, &vector}, func() error {
		c.Hit.Collection = refs[colID]
		c.Terms = make([]TermCount, len(out.Terms))
		if err := tc.read(vector, out.Terms, c.Terms); err != nil {
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
		return ChunkCandidates{}, fmt.Errorf("search chunks: %w", err)
	}
	return out, nil
}

// HeadingText joins a heading path as the index does ("A > B").
func HeadingText(path []string) string { return strings.Join(path, " > ") }
