package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Chunk embeddings (migrations/028): a vector per document chunk and
// model, owned by the chunk's collection (a shared scope's chunks are
// embedded once, whoever reads them). The writes that make chunks (a put
// chunked inline, a document's index job) call the ChunkHook in their
// transaction, which enqueues the chunks' embed jobs; SearchChunksHybrid
// adds the vector side to a chunk search.

// DocChunksRef names the chunks of one document's content: chunk indexes
// 0 to Chunks-1 of the content whose hash is Hash.
type DocChunksRef struct {
	CollectionID int64
	DocID        string
	Hash         string
	Chunks       int
}

// ChunkHook is called inside the transaction that wrote a document's
// chunks (PutDocument with a Chunker, IndexDocument), before it commits:
// the worker inserts the chunks' embed jobs there, so that chunks never
// exist without their job. An error rolls the write back. An unchanged
// re-put writes no chunks and does not call it.
type ChunkHook func(ctx context.Context, tx pgx.Tx, docs []DocChunksRef) error

// SetChunkHook sets the hook every Store sharing s's pool calls (nil
// removes it). Set it before the writes it must see start.
func (s *Store) SetChunkHook(h ChunkHook) {
	if h == nil {
		s.hooks.chunks.Store(nil)
		return
	}
	s.hooks.chunks.Store(&h)
}

// chunksWritten calls the chunk hook, if any, on the transaction s runs in.
func (s *Store) chunksWritten(ctx context.Context, docs []DocChunksRef) error {
	h := s.hooks.chunks.Load()
	if h == nil || len(docs) == 0 {
		return nil
	}
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return fmt.Errorf("chunk hook: not in a transaction")
	}
	if err := (*h)(ctx, tx, docs); err != nil {
		return fmt.Errorf("chunk hook: %w", err)
	}
	return nil
}

// chunksRef is the hook's argument for n chunks written (none: no call).
func chunksRef(collectionID int64, docID, hash string, n int) []DocChunksRef {
	if n == 0 {
		return nil
	}
	return []DocChunksRef{{CollectionID: collectionID, DocID: docID, Hash: hash, Chunks: n}}
}

// ChunkEmbeddingTarget is a chunk to embed.
type ChunkEmbeddingTarget struct {
	ChunkIndex  int
	HeadingPath []string
	Text        string
	// Sum identifies the chunk's heading path and text (chunkSum): its
	// write (ChunkEmbeddingWrite) or refusal names it, so that nothing is
	// saved for a chunk cut again meanwhile (a put of the same content
	// under another chunking) at the same index of the same content.
	Sum string
}

// chunkSum is the SQL of a chunk's Sum, ch its doc_chunks row. Migration
// 073's trigger knows the vector and refusal writes that compare it by
// this text in their statement ("md5(ch.heading_path::text || "): keep it.
func chunkSum(ch string) string {
	return `md5(` + ch + `.heading_path::text || ` + ch + `.text)`
}

// ChunkEmbeddingTargets returns the chunks from..to-1 of the document that
// have no current vector for model, in index order, while the document is
// ready with the content of hash; none when it is gone or holds other
// content (a later put replaced it and enqueued its own jobs). Chunks the
// server refused for model (SaveChunkEmbeddingRefusals) are left out.
func (s *Store) ChunkEmbeddingTargets(ctx context.Context, collectionID int64, docID, hash string, from, to int, model string) ([]ChunkEmbeddingTarget, error) {
	rows, err := s.db.Query(ctx, `SELECT ch.chunk_index, ch.heading_path, ch.text, `+chunkSum("ch")+`
		FROM documents d JOIN doc_chunks ch ON ch.collection_id = d.collection_id AND ch.doc_id = d.doc_id
		WHERE d.collection_id = $1 AND d.doc_id = $2 AND d.content_hash = $3 AND d.status = 'ready'
		  AND ch.chunk_index >= $4 AND ch.chunk_index < $5
		  AND NOT EXISTS (SELECT FROM chunk_embeddings e WHERE e.collection_id = ch.collection_id AND e.model = $6
			AND e.doc_id = ch.doc_id AND e.chunk_index = ch.chunk_index AND e.content_hash = d.content_hash`+usableVector("e", "$6")+`)
		  AND NOT `+refusedChunk("ch", "d", "$6")+`
		ORDER BY ch.chunk_index`, collectionID, docID, hash, from, to, model)
	if err != nil {
		return nil, fmt.Errorf("chunk embedding targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ChunkEmbeddingTarget, error) {
		var t ChunkEmbeddingTarget
		err := r.Scan(&t.ChunkIndex, &t.HeadingPath, &t.Text, &t.Sum)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("chunk embedding targets: %w", err)
	}
	return out, nil
}

// ChunkEmbeddingWrite is one chunk vector to save.
type ChunkEmbeddingWrite struct {
	ChunkIndex int
	// Sum is the chunk's, as its target had it (ChunkEmbeddingTarget):
	// the vector is saved only while the chunk at ChunkIndex is that one.
	Sum string
	// Dims is the vector's dimensions; Vector its stored form
	// (embedding.Encode).
	Dims   int
	Vector []byte
}

// shareCollection locks the collection (KEY SHARE: a put and a vector
// write take it so, a delete of the collection FOR UPDATE), and reports
// false when it is gone.
func (s *Store) shareCollection(ctx context.Context, collectionID int64) (bool, error) {
	var one int
	err := s.db.QueryRow(ctx, `SELECT 1 FROM collections WHERE id = $1 FOR KEY SHARE`, collectionID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// SaveChunkEmbeddings saves vectors of model for chunks of the document's
// content of hash, replacing a chunk's earlier vector of the same model.
// Nothing is saved when the document no longer holds that content (a
// re-put raced the job), nor for a chunk that is gone or was cut again
// (its Sum differs: a put of the same content cut it otherwise), even
// when the re-put commits while the statement runs. It returns how many were saved. Run it
// outside a transaction (it runs one of its own): such a race aborts the
// statement.
//
// It takes its collection's key share lock first, as a put does: the
// deletion of the collection (a forget's) then waits for the save, or the
// save for the deletion. Without it the two deadlocked: the save's foreign
// key checks held a document's chunks and its trigger then waited for the
// collection's generation row, which the deletion held (deleted, or moved
// by another document's vectors going) while it waited for those chunks.
// Then it takes the document's share lock, while it holds hash: a re-put,
// an index job or a delete of the document waits for the save, and its
// cascade takes the saved vectors with the old chunks (a re-put of new
// content saves again those of the chunks it cuts alike, under its own
// hash: carryChunkVectors).
func (s *Store) SaveChunkEmbeddings(ctx context.Context, model string, collectionID int64, docID, hash string, ws []ChunkEmbeddingWrite) (int64, error) {
	if len(ws) == 0 {
		return 0, nil
	}
	idx, dims, vecs, sums := make([]int32, len(ws)), make([]int32, len(ws)), make([][]byte, len(ws)), make([]string, len(ws))
	for i, w := range ws {
		idx[i], dims[i], vecs[i], sums[i] = int32(w.ChunkIndex), int32(w.Dims), w.Vector, w.Sum
	}
	var saved int64
	err := s.inTx(ctx, func(q *Store) error {
		if ok, err := q.shareCollection(ctx, collectionID); !ok || err != nil {
			return err // or deleted, with the document
		}
		// The document, while it holds the content embedded, until the
		// save commits: a re-put (its FOR UPDATE), an index job or a
		// delete of it waits, and then deletes these vectors with the
		// chunks. The statement below took its snapshot after the lock, so
		// it reads this content; without the lock a re-put committed
		// between that snapshot and the rows' writes, and its chunks (the
		// same indexes) let the old content's vectors in, over the new
		// content's own when its job had saved them (ON CONFLICT).
		if ok, err := q.shareReadyDocument(ctx, collectionID, docID, hash); !ok || err != nil {
			return err // not ok: gone, or other content: its own jobs embed it
		}
		tag, err := q.db.Exec(ctx, `
			INSERT INTO chunk_embeddings AS e (collection_id, doc_id, chunk_index, model, content_hash, dims, vector)
			SELECT d.collection_id, d.doc_id, ch.chunk_index, $4, d.content_hash, w.d, w.v
			FROM documents d
			JOIN unnest($5::int[], $6::int[], $7::bytea[], $8::text[]) AS w(i, d, v, s) ON true
			JOIN doc_chunks ch ON ch.collection_id = d.collection_id AND ch.doc_id = d.doc_id AND ch.chunk_index = w.i
				AND `+chunkSum("ch")+` = w.s
			WHERE d.collection_id = $1 AND d.doc_id = $2 AND d.content_hash = $3 AND d.status = 'ready'
			ORDER BY ch.chunk_index
			ON CONFLICT (collection_id, model, doc_id, chunk_index) DO UPDATE
				SET content_hash = excluded.content_hash, dims = excluded.dims, vector = excluded.vector, created_at = now()`,
			collectionID, docID, hash, model, idx, dims, vecs, sums)
		if err != nil {
			return err
		}
		saved = tag.RowsAffected()
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		// foreign_key_violation: a re-put or a delete committed between
		// the statement's snapshot, which still held the chunks, and its
		// foreign key check. Those chunks are gone; nothing to save.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("save chunk embeddings: %w", err)
	}
	return saved, nil
}

// DocCursor is where a walk over documents (MissingChunkEmbeddings) is:
// after this collection id and document id.
type DocCursor struct {
	CollectionID int64
	DocID        string
}

// MissingChunkEmbeddings returns up to limit ready documents (of the
// collections user owns; of every collection, shared ones included, when
// user is empty) with a chunk lacking a current vector for model, after
// the cursor, in (collection, document) order: a backfill pages through
// them by passing the last one back. A chunk the server refused for model
// (SaveChunkEmbeddingRefusals) counts as not lacking one: the sweep sent
// it again every hour, refused each time.
func (s *Store) MissingChunkEmbeddings(ctx context.Context, user, model string, after DocCursor, limit int) ([]DocChunksRef, error) {
	rows, err := s.db.Query(ctx, `SELECT d.collection_id, d.doc_id, d.content_hash, d.chunks
		FROM documents d JOIN collections c ON c.id = d.collection_id
		WHERE ($1 = '' OR (c.owner_kind = 'user' AND c.owner = $1)) AND d.status = 'ready' AND d.chunks > 0
		  AND (d.collection_id, d.doc_id) > ($3, $4)
		  AND d.chunks > (SELECT count(*) FROM chunk_embeddings e WHERE e.collection_id = d.collection_id
			AND e.model = $2 AND e.doc_id = d.doc_id AND e.content_hash = d.content_hash`+usableVector("e", "$2")+`)
			+ `+refusedChunks("d", "$2")+`
		ORDER BY d.collection_id, d.doc_id LIMIT $5`, user, model, after.CollectionID, after.DocID, limit)
	if err != nil {
		return nil, fmt.Errorf("missing chunk embeddings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DocChunksRef, error) {
		var d DocChunksRef
		err := r.Scan(&d.CollectionID, &d.DocID, &d.Hash, &d.Chunks)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("missing chunk embeddings: %w", err)
	}
	return out, nil
}

// CountChunkEmbeddings counts the chunks of ready documents (of the
// collections user owns; of every collection when empty) and those with a
// current vector for model.
func (s *Store) CountChunkEmbeddings(ctx context.Context, user, model string) (EmbeddingCount, error) {
	return s.CountChunkEmbeddingsAt(ctx, user, model, EmbeddingMark{})
}

// CountChunkEmbeddingsAt is CountChunkEmbeddings of the documents put
// before mark (with the content they hold: coalesce(put_at, created_at),
// the put time forget reads, migration 066). A document put again with
// new content after the mark is new memory, which its own jobs embed:
// read by created_at (the first put's), a wait counted it too, and beside
// a serve that kept re-putting documents it did not end.
func (s *Store) CountChunkEmbeddingsAt(ctx context.Context, user, model string, mark EmbeddingMark) (EmbeddingCount, error) {
	var n EmbeddingCount
	err := s.db.QueryRow(ctx, `SELECT coalesce(sum(d.chunks), 0)::bigint, coalesce(sum((SELECT count(*) FROM chunk_embeddings e
			WHERE e.collection_id = d.collection_id AND e.model = $2 AND e.doc_id = d.doc_id
			  AND e.content_hash = d.content_hash`+usableVector("e", "$2")+`)), 0)::bigint,
			coalesce(sum(`+refusedChunks("d", "$2")+`), 0)::bigint
		FROM documents d JOIN collections c ON c.id = d.collection_id
		WHERE ($1 = '' OR (c.owner_kind = 'user' AND c.owner = $1)) AND d.status = 'ready'
		  AND (NOT $3 OR coalesce(d.put_at, d.created_at) < $4)`, user, model, mark.set, mark.docsBefore).Scan(&n.Items, &n.Embedded, &n.Refused)
	if err != nil {
		return EmbeddingCount{}, fmt.Errorf("count chunk embeddings: %w", err)
	}
	return n, nil
}

// refusedChunk is the condition on a chunk row ch of the document row d
// that the embeddings server refused its text of d's current content for
// the model in SQL parameter modelParam (migration 068).
func refusedChunk(ch, d, modelParam string) string {
	return fmt.Sprintf(`EXISTS (SELECT FROM chunk_embedding_refusals r
			WHERE r.collection_id = %[1]s.collection_id AND r.model = %[3]s AND r.doc_id = %[1]s.doc_id
			  AND r.chunk_index = %[1]s.chunk_index AND r.content_hash = %[2]s.content_hash)`, ch, d, modelParam)
}

// refusedChunks is the count, for the document row d, of its chunks the
// server refused for the model in SQL parameter modelParam (of its
// current content) that have no usable vector of it: a refusal outlives
// a vector saved later for the same text (a serve of a release before
// 068, whose sweep sends refused chunks again).
func refusedChunks(d, modelParam string) string {
	return fmt.Sprintf(`(SELECT count(*) FROM chunk_embedding_refusals r
			WHERE r.collection_id = %[1]s.collection_id AND r.model = %[2]s AND r.doc_id = %[1]s.doc_id
			  AND r.content_hash = %[1]s.content_hash
			  AND NOT EXISTS (SELECT FROM chunk_embeddings e WHERE e.collection_id = r.collection_id AND e.model = r.model
				AND e.doc_id = r.doc_id AND e.chunk_index = r.chunk_index AND e.content_hash = r.content_hash`, d, modelParam) +
		usableVector("e", modelParam) + "))"
}

// SaveChunkEmbeddingRefusals records that the embeddings server refused
// the texts of the document's chunks refused (targets of its content of
// hash, by index and Sum) for model (as input, or answered with vectors
// of other dimensions than the model's), so that MissingChunkEmbeddings
// (the sweep, a backfill) and ChunkEmbeddingTargets leave them out until
// the document's content or the model changes. Nothing is recorded when
// the document no longer holds that content, nor for a chunk cut again
// since (its Sum differs). It returns how many were recorded. It locks as
// SaveChunkEmbeddings does, and runs outside a transaction as it does.
func (s *Store) SaveChunkEmbeddingRefusals(ctx context.Context, model string, collectionID int64, docID, hash string, refused []ChunkEmbeddingTarget) (int64, error) {
	if len(refused) == 0 {
		return 0, nil
	}
	is, sums := make([]int32, len(refused)), make([]string, len(refused))
	for i, t := range refused {
		is[i], sums[i] = int32(t.ChunkIndex), t.Sum
	}
	var saved int64
	err := s.inTx(ctx, func(q *Store) error {
		if ok, err := q.shareCollection(ctx, collectionID); !ok || err != nil {
			return err
		}
		if ok, err := q.shareReadyDocument(ctx, collectionID, docID, hash); !ok || err != nil {
			return err // not ok: gone, or other content: its own jobs embed it
		}
		tag, err := q.db.Exec(ctx, `
			INSERT INTO chunk_embedding_refusals AS r (collection_id, doc_id, chunk_index, model, content_hash)
			SELECT ch.collection_id, ch.doc_id, ch.chunk_index, $4, $3
			FROM doc_chunks ch JOIN unnest($5::int[], $6::text[]) AS w(i, s) ON ch.chunk_index = w.i AND `+chunkSum("ch")+` = w.s
			WHERE ch.collection_id = $1 AND ch.doc_id = $2
			ORDER BY ch.chunk_index
			ON CONFLICT (collection_id, model, doc_id, chunk_index) DO UPDATE
				SET content_hash = excluded.content_hash, refused_at = now()`,
			collectionID, docID, hash, model, is, sums)
		if err != nil {
			return err
		}
		saved = tag.RowsAffected()
		return nil
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return 0, nil // the chunks went meanwhile, as in SaveChunkEmbeddings
	}
	if err != nil {
		return 0, fmt.Errorf("save chunk embedding refusals: %w", err)
	}
	return saved, nil
}

// ForgetChunkEmbeddingRefusals deletes the chunk refusals recorded for
// model of the collections user owns (of every collection when empty),
// as ForgetEmbeddingRefusals does the items', and returns how many were
// of the documents' current content. It deletes them collection by
// collection, as forgetChunkRefusals does.
func (s *Store) ForgetChunkEmbeddingRefusals(ctx context.Context, user, model string) (int64, error) {
	n, err := s.forgetChunkRefusals(ctx, user, model, false)
	if err != nil {
		return 0, fmt.Errorf("forget chunk embedding refusals: %w", err)
	}
	return n, nil
}

// forgetChunkRefusals deletes the chunk refusals recorded for model of
// the collections user owns (of every collection when empty), those
// recorded before the model's dimensions last changed alone when stale,
// one transaction per collection, and returns how many were of the
// documents' current content. Each transaction locks the collection (KEY
// SHARE) and then the documents holding such refusals (SHARE, in
// document order), as deleteOtherModelChunks does, before its delete: a
// put of new content keeps the refusals of the chunks it cuts alike
// (keptChunkVectors), and one that had read them before such a delete
// committed saved them again after it, under its new content, forgotten
// refusals back. It now waits for the put, whose kept refusals the
// delete then sees, or the put for it.
func (s *Store) forgetChunkRefusals(ctx context.Context, user, model string, stale bool) (int64, error) {
	rows, err := s.db.Query(ctx, `SELECT DISTINCT r.collection_id FROM chunk_embedding_refusals r
		JOIN collections c ON c.id = r.collection_id
		WHERE r.model = $2 AND ($1 = '' OR (c.owner_kind = 'user' AND c.owner = $1)) ORDER BY 1`, user, model)
	if err != nil {
		return 0, err
	}
	colls, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range colls {
		err := s.inTx(ctx, func(q *Store) error {
			if ok, err := q.shareCollection(ctx, c); !ok || err != nil {
				return err // or deleted, with its refusals
			}
			if _, err := q.db.Exec(ctx, `SELECT count(*) FROM (SELECT FROM documents d WHERE d.collection_id = $1
				AND EXISTS (SELECT FROM chunk_embedding_refusals r WHERE r.collection_id = d.collection_id AND r.doc_id = d.doc_id AND r.model = $2)
				ORDER BY d.doc_id FOR SHARE OF d) l`, c, model); err != nil {
				return err
			}
			var cn int64
			if err := q.db.QueryRow(ctx, `WITH d AS (DELETE FROM chunk_embedding_refusals r USING documents d
				WHERE r.collection_id = $1 AND d.collection_id = r.collection_id AND d.doc_id = r.doc_id AND r.model = $2
				  AND (NOT $3 OR r.refused_at < (SELECT m.recorded_at FROM embedding_models m WHERE m.model = r.model))
				RETURNING r.content_hash = d.content_hash AS current)
				SELECT count(*) FILTER (WHERE current) FROM d`, c, model, stale).Scan(&cn); err != nil {
				return err
			}
			n += cn
			return nil
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// CollectionVectors is a collection's current chunk vectors of one model,
// as a process caches them, and the generation they were read at.
type CollectionVectors struct {
	// Generation is the collection's embedding generation
	// (migrations/028) when the vectors were read; 0: none.
	Generation int64
	// Vectors are in (document, chunk index) order.
	Vectors []ChunkVector
}

// ChunkVector is one chunk's current vector.
type ChunkVector struct {
	DocID      string
	ChunkIndex int
	Dims       int
	// Vector is the stored form (embedding.Decode); the vectors of one
	// read share one allocation.
	Vector []byte
}

// collectionVectorsSQL reads the generation (a first row with a NULL
// document) and the vectors in one statement, so from one snapshot; the
// join drops vectors of content a document no longer holds, and
// ofRecordedDims vectors of other dimensions than those recorded for the
// model (as UserVectors).
var collectionVectorsSQL = `
	SELECT (SELECT generation FROM chunk_embedding_generations WHERE collection_id = $1), NULL::text, NULL::int,
		NULL::int, NULL::bytea
	UNION ALL
	(SELECT NULL, e.doc_id, e.chunk_index, e.dims, e.vector FROM chunk_embeddings e
	JOIN documents d ON d.collection_id = e.collection_id AND d.doc_id = e.doc_id AND d.content_hash = e.content_hash
	WHERE e.collection_id = $1 AND e.model = $2` + ofRecordedDims("e", "$2") + `
	ORDER BY e.doc_id, e.chunk_index)`

// CollectionVectors returns the collection's current chunk vectors of
// model and their generation, in one query. It does not check who reads:
// callers pass collections a search found readable.
func (s *Store) CollectionVectors(ctx context.Context, collectionID int64, model string) (CollectionVectors, error) {
	rows, err := s.db.Query(ctx, collectionVectorsSQL, collectionID, model)
	if err != nil {
		return CollectionVectors{}, fmt.Errorf("collection vectors: %w", err)
	}
	defer rows.Close()
	var (
		out   CollectionVectors
		gen   pgtype.Int8
		doc   pgtype.Text
		idx   pgtype.Int4
		dims  pgtype.Int4
		vec   pgtype.DriverBytes // valid until the next row: copied
		arena []byte
		spans []span
	)
	for rows.Next() {
		if err := rows.Scan(&gen, &doc, &idx, &dims, &vec); err != nil {
			return CollectionVectors{}, fmt.Errorf("collection vectors: %w", err)
		}
		if !doc.Valid {
			out.Generation = gen.Int64
			continue
		}
		d := doc.String
		if n := len(out.Vectors); n > 0 && out.Vectors[n-1].DocID == d {
			d = out.Vectors[n-1].DocID // one string per document
		}
		out.Vectors = append(out.Vectors, ChunkVector{DocID: d, ChunkIndex: int(idx.Int32), Dims: int(dims.Int32)})
		spans = append(spans, push(&arena, vec))
	}
	if err := rows.Err(); err != nil {
		return CollectionVectors{}, fmt.Errorf("collection vectors: %w", err)
	}
	for i := range out.Vectors {
		out.Vectors[i].Vector = spans[i].of(arena)
	}
	return out, nil
}

// ChunkPick is a chunk the vector side of a search picked, with its vector
// score (0..1).
type ChunkPick struct {
	CollectionID int64
	DocID        string
	ChunkIndex   int
	Score        float64
}

// ChunkVectorLoader reads a searched collection's vectors in the search's
// snapshot.
type ChunkVectorLoader func(ctx context.Context, collectionID int64, model string) (CollectionVectors, error)

// ChunkPicker is the vector side of a hybrid chunk search, called in the
// search's snapshot with the searched collections' embedding generations
// (a collection without vectors is absent or 0) and a loader of their
// vectors; it returns the chunks it picks. Picks of other collections are
// dropped: the vector side never reaches past the reader's collections.
type ChunkPicker func(ctx context.Context, generations map[int64]int64, load ChunkVectorLoader) ([]ChunkPick, error)

// VectorChunk is a chunk the vector side picked, with what a citation
// needs (no Text yet) and its vector score.
type VectorChunk struct {
	Hit   ChunkHit
	Score float64
}

// HybridChunkCandidates are a hybrid chunk search's candidates: the
// lexical ones, and the chunks the vector side picked (some of them may
// be among the lexical matches too).
type HybridChunkCandidates struct {
	ChunkCandidates
	Vector []VectorChunk
}

// HybridChunkRanker ranks a hybrid chunk search's candidates, as
// ChunkRanker does a lexical one's: it returns the hits it keeps (of
// Matches or Vector, Score set), best first, without Text.
type HybridChunkRanker func(c HybridChunkCandidates) []ChunkHit

// chunkGenerationsSQL reads the searched collections' embedding
// generations, in the search's snapshot.
const chunkGenerationsSQL = `SELECT collection_id, generation FROM chunk_embedding_generations WHERE collection_id = ANY($1)`

// vectorChunksSQL reads what a citation needs of the picked chunks (not
// their text), in the order given.
const vectorChunksSQL = `
	SELECT ch.collection_id, ch.doc_id, d.source, ch.chunk_index, ch.heading_path, ch.byte_start, ch.byte_end
	FROM unnest($1::bigint[], $2::text[], $3::int[]) WITH ORDINALITY AS u(c, d, i, n)
	JOIN doc_chunks ch ON ch.collection_id = u.c AND ch.doc_id = u.d AND ch.chunk_index = u.i
	JOIN documents d ON d.collection_id = ch.collection_id AND d.doc_id = ch.doc_id
	ORDER BY u.n`

// SearchChunksHybrid is SearchChunks with a vector side: in the same
// snapshot it reads the lexical candidates, the searched collections'
// embedding generations, lets pick choose chunks by vector (reading vectors
// through its loader, in the snapshot, when its copies are not current),
// reads the picked chunks, ranks them all with rank and reads the kept
// hits' text. Access is SearchChunks': the collections searched are
// the ones q may read, and only their chunks are picked or read.
func (s *Store) SearchChunksHybrid(ctx context.Context, q ChunkQuery, pick ChunkPicker, rank HybridChunkRanker) ([]ChunkHit, error) {
	var hits []ChunkHit
	err := s.snapshot(ctx, func(r *Store) error {
		c, byRef, err := r.chunkCandidates(ctx, q)
		if err != nil {
			return err
		}
		if byRef == nil {
			// No keywords (or no collection): the searched collections
			// are read here.
			cols, err := r.readable(ctx, q)
			if err != nil {
				return err
			}
			byRef = make(map[string]int64, len(cols))
			for _, col := range cols {
				byRef[col.Ref(q.Reader)] = col.ID
			}
		}
		if len(byRef) == 0 {
			return nil
		}
		ids := make([]int64, 0, len(byRef))
		refs := make(map[int64]string, len(byRef))
		for ref, id := range byRef {
			ids = append(ids, id)
			refs[id] = ref
		}
		gens := make(map[int64]int64, len(ids))
		rows, err := r.db.Query(ctx, chunkGenerationsSQL, ids)
		if err != nil {
			return fmt.Errorf("generations: %w", err)
		}
		var id, g int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &g}, func() error { gens[id] = g; return nil }); err != nil {
			return fmt.Errorf("generations: %w", err)
		}
		picks, err := pick(ctx, gens, func(ctx context.Context, id int64, model string) (CollectionVectors, error) {
			if _, ok := refs[id]; !ok {
				return CollectionVectors{}, fmt.Errorf("collection %d is not searched", id)
			}
			return r.CollectionVectors(ctx, id, model)
		})
		if err != nil {
			return fmt.Errorf("vector side: %w", err)
		}
		vc, err := r.vectorChunks(ctx, picks, refs)
		if err != nil {
			return err
		}
		hits = rank(HybridChunkCandidates{ChunkCandidates: c, Vector: vc})
		return r.readChunkTexts(ctx, hits, byRef)
	})
	if err != nil {
		return nil, fmt.Errorf("search chunks: %w", err)
	}
	if hits == nil {
		hits = []ChunkHit{}
	}
	return hits, nil
}

// vectorChunks reads the picked chunks of the searched collections (refs)
// as VectorChunks, in pick order; picks of other collections are dropped.
func (s *Store) vectorChunks(ctx context.Context, picks []ChunkPick, refs map[int64]string) ([]VectorChunk, error) {
	var cols []int64
	var docs []string
	var idx []int32
	var scores []float64
	for _, p := range picks {
		if _, ok := refs[p.CollectionID]; !ok {
			continue
		}
		cols, docs, idx, scores = append(cols, p.CollectionID), append(docs, p.DocID), append(idx, int32(p.ChunkIndex)), append(scores, p.Score)
	}
	if len(cols) == 0 {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, vectorChunksSQL, cols, docs, idx)
	if err != nil {
		return nil, fmt.Errorf("vector chunks: %w", err)
	}
	var (
		out   []VectorChunk
		h     ChunkHit
		colID int64
	)
	// A picked chunk is in the snapshot the vectors were read from, so
	// every pick has its row; pick order is kept by the statement.
	k := 0
	_, err = pgx.ForEachRow(rows, []any{&colID, &h.DocumentID, &h.Source, &h.ChunkIndex, &h.HeadingPath, &h.Start, &h.End}, func() error {
		for k < len(cols) && (cols[k] != colID || docs[k] != h.DocumentID || int(idx[k]) != h.ChunkIndex) {
			k++
		}
		if k == len(cols) {
			return fmt.Errorf("vector chunks: rows out of order")
		}
		h.Collection = refs[colID]
		if h.HeadingPath == nil {
			h.HeadingPath = []string{}
		}
		out = append(out, VectorChunk{Hit: h, Score: scores[k]})
		h = ChunkHit{}
		k++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vector chunks: %w", err)
	}
	return out, nil
}

// readChunkTexts sets the kept hits' Text, read in one query.
func (s *Store) readChunkTexts(ctx context.Context, hits []ChunkHit, byRef map[string]int64) error {
	if len(hits) == 0 {
		return nil
	}
	cols, docs, idx := make([]int64, len(hits)), make([]string, len(hits)), make([]int32, len(hits))
	for i, h := range hits {
		id, ok := byRef[h.Collection]
		if !ok {
			return fmt.Errorf("ranker returned a hit of collection %q, not searched", h.Collection)
		}
		cols[i], docs[i], idx[i] = id, h.DocumentID, int32(h.ChunkIndex)
	}
	rows, err := s.db.Query(ctx, chunkTextsSQL, cols, docs, idx)
	if err != nil {
		return err
	}
	texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(texts) != len(hits) {
		return fmt.Errorf("ranker returned %d hits, %d of them candidates", len(hits), len(texts))
	}
	for i := range hits {
		hits[i].Text = texts[i]
	}
	return nil
}

// shareReadyDocument locks the document FOR SHARE while it is ready and
// holds the content of hash, until the transaction ends; false when it is
// gone or holds other content.
func (s *Store) shareReadyDocument(ctx context.Context, collectionID int64, docID, hash string) (bool, error) {
	var one int
	err := s.db.QueryRow(ctx, `SELECT 1 FROM documents WHERE collection_id = $1 AND doc_id = $2
		AND content_hash = $3 AND status = 'ready' FOR SHARE`, collectionID, docID, hash).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// keptVectors are the vectors and refusals a put of new content carries
// over to its new chunks (keptChunkVectors, carryChunkVectors): for each,
// the new chunk's index, the model, and the sum (chunkSum) of the old
// chunk it was of; a vector's dimensions and stored form, a refusal's
// time.
type keptVectors struct {
	vIdx, vDims  []int32
	vModel, vSum []string
	vVec         [][]byte
	rIdx         []int32
	rModel, rSum []string
	rAt          []time.Time
}

// keptChunkVectors reads, in a put's transaction (which holds the
// document FOR UPDATE) before it deletes the document's chunks, the
// usable vectors and the refusals of the old content (of hash) of every
// old chunk whose heading path and text a chunk of cut has, keyed by
// that new chunk's index: the embedding input (chunkEmbedText, of the
// heading path and text) is the same, and so is what the model makes
// of it. A text the old content held twice gives its first chunk's.
func (s *Store) keptChunkVectors(ctx context.Context, collectionID int64, docID, hash string, cut []ChunkText) (keptVectors, error) {
	paths, texts, _, _ := chunkColumns(cut)
	rows, err := s.db.Query(ctx, keptChunkVectorsSQL, collectionID, docID, paths, texts, hash)
	if err != nil {
		return keptVectors{}, fmt.Errorf("read kept chunk vectors: %w", err)
	}
	var (
		k       keptVectors
		refusal bool
		idx     int32
		model   string
		sum     string
		dims    pgtype.Int4
		vec     []byte
		at      pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&refusal, &idx, &model, &sum, &dims, &vec, &at}, func() error {
		if refusal {
			k.rIdx, k.rModel, k.rSum, k.rAt = append(k.rIdx, idx), append(k.rModel, model), append(k.rSum, sum), append(k.rAt, at.Time)
			return nil
		}
		k.vIdx, k.vModel, k.vSum, k.vDims = append(k.vIdx, idx), append(k.vModel, model), append(k.vSum, sum), append(k.vDims, dims.Int32)
		k.vVec = append(k.vVec, vec) // a copy of its own (pgx's bytea scan)
		return nil
	})
	if err != nil {
		return keptVectors{}, fmt.Errorf("read kept chunk vectors: %w", err)
	}
	return k, nil
}

// keptChunkVectorsSQL is keptChunkVectors' statement. Each old chunk's
// vectors and refusals are read by its index (LATERAL, OFFSET 0 so that
// it is not pulled up into a join: the index is a condition of the
// lookup). Joined, the planner, which took the old chunks that match for
// one row, scanned every vector of the document for each of them
// (TestPutOfNewContentReadsKeptVectorsByChunk).
var keptChunkVectorsSQL = `
		WITH n AS MATERIALIZED (SELECT (u.i - 1)::int AS i, u.t,
				CASE WHEN u.h = '' THEN '{}'::text[] ELSE string_to_array(u.h, E'\x1f') END AS path
			FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(h, t, i)),
		o AS MATERIALIZED (SELECT n.i, ch.chunk_index, ` + chunkSum("ch") + ` AS sum
			FROM n JOIN doc_chunks ch ON ch.collection_id = $1 AND ch.doc_id = $2 AND ch.text = n.t AND ch.heading_path = n.path)
		(SELECT DISTINCT ON (o.i, e.model) false, o.i, e.model, o.sum, e.dims, e.vector, NULL::timestamptz
		FROM o CROSS JOIN LATERAL (SELECT e.model, e.dims, e.vector FROM chunk_embeddings e
			WHERE e.collection_id = $1 AND e.doc_id = $2 AND e.chunk_index = o.chunk_index
			AND e.content_hash = $5` + usableVector("e", "e.model") + ` OFFSET 0) e
		ORDER BY o.i, e.model, o.chunk_index)
		UNION ALL
		(SELECT DISTINCT ON (o.i, r.model) true, o.i, r.model, o.sum, NULL, NULL, r.refused_at
		FROM o CROSS JOIN LATERAL (SELECT r.model, r.refused_at FROM chunk_embedding_refusals r
			WHERE r.collection_id = $1 AND r.doc_id = $2 AND r.chunk_index = o.chunk_index
			AND r.content_hash = $5 OFFSET 0) r
		ORDER BY o.i, r.model, o.chunk_index)`

// carryChunkVectors saves k (keptChunkVectors) onto the document's new
// chunks, in the put's transaction after writeChunks wrote them, under
// the new content's hash: a vector or refusal goes onto the chunk at its
// index only while that chunk's sum is the old chunk's (the heading path
// and text it was of). Both statements compare the sum by chunkSum's
// text, which migration 073's trigger looks for: a write without it onto
// a document this release cut is dropped. The new chunks have neither
// (the old ones' went with them, by the cascade); the carried vectors
// bump the collection's embedding generation as any save does, so that
// a cached copy of its vectors is read again. The embed jobs the put
// enqueues (chunksWritten) then find these chunks embedded, or refused,
// and leave them out (ChunkEmbeddingTargets).
func (s *Store) carryChunkVectors(ctx context.Context, collectionID int64, docID, hash string, k keptVectors) error {
	if len(k.vIdx) > 0 {
		if _, err := s.db.Exec(ctx, `
			INSERT INTO chunk_embeddings (collection_id, doc_id, chunk_index, model, content_hash, dims, vector)
			SELECT ch.collection_id, ch.doc_id, ch.chunk_index, w.m, $3, w.d, w.v
			FROM unnest($4::int[], $5::text[], $6::text[], $7::int[], $8::bytea[]) AS w(i, m, s, d, v)
			JOIN doc_chunks ch ON ch.collection_id = $1 AND ch.doc_id = $2 AND ch.chunk_index = w.i AND `+chunkSum("ch")+` = w.s
			ORDER BY ch.chunk_index, w.m`,
			collectionID, docID, hash, k.vIdx, k.vModel, k.vSum, k.vDims, k.vVec); err != nil {
			return fmt.Errorf("carry chunk vectors: %w", err)
		}
	}
	if len(k.rIdx) > 0 {
		// Kept with their time: a refusal made before its model's
		// dimensions changed is still forgotten as stale
		// (ForgetStaleEmbeddingRefusals).
		if _, err := s.db.Exec(ctx, `
			INSERT INTO chunk_embedding_refusals (collection_id, doc_id, chunk_index, model, content_hash, refused_at)
			SELECT ch.collection_id, ch.doc_id, ch.chunk_index, w.m, $3, w.a
			FROM unnest($4::int[], $5::text[], $6::text[], $7::timestamptz[]) AS w(i, m, s, a)
			JOIN doc_chunks ch ON ch.collection_id = $1 AND ch.doc_id = $2 AND ch.chunk_index = w.i AND `+chunkSum("ch")+` = w.s
			ORDER BY ch.chunk_index, w.m`,
			collectionID, docID, hash, k.rIdx, k.rModel, k.rSum, k.rAt); err != nil {
			return fmt.Errorf("carry chunk refusals: %w", err)
		}
	}
	return nil
}
