package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ContextRef names one context item.
type ContextRef struct {
	UserID string
	ID     int64
}

// ContextHook is called inside the transaction that inserted context items
// or changed their text, with those items, before it commits: the worker
// inserts the items' embedding jobs there, so that an item never exists
// without its job. An error rolls the write back.
//
// The paths that call it: InsertContext (extraction, the re-extraction
// after a spend cap), StoreContext (a new item only), UpdateContext (when
// the text changed), Import (the items it inserted).
type ContextHook func(ctx context.Context, tx pgx.Tx, items []ContextRef) error

// hookBox holds a Store's hook, shared by the Stores WithTx derives.
type hookBox struct {
	p      atomic.Pointer[ContextHook]
	chunks atomic.Pointer[ChunkHook]
	stream atomic.Pointer[TurnStreamFunc]
	clock  Clock
}

// SetContextHook sets the hook every Store sharing s's pool calls (nil
// removes it). Set it before the writes it must see start.
func (s *Store) SetContextHook(h ContextHook) {
	if h == nil {
		s.hooks.p.Store(nil)
		return
	}
	s.hooks.p.Store(&h)
}

// contextWritten calls the hook, if any, on the transaction s runs in.
func (s *Store) contextWritten(ctx context.Context, items []ContextRef) error {
	h := s.hooks.p.Load()
	if h == nil || len(items) == 0 {
		return nil
	}
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return fmt.Errorf("context hook: not in a transaction")
	}
	if err := (*h)(ctx, tx, items); err != nil {
		return fmt.Errorf("context hook: %w", err)
	}
	return nil
}

// hasContextHook reports whether a hook is set.
func (s *Store) hasContextHook() bool { return s.hooks.p.Load() != nil }

// EmbeddingTarget is a context item to embed: its text and the content hash
// the vector will be saved against.
type EmbeddingTarget struct {
	ID          int64
	UserID      string
	Question    string
	Answer      string
	ContentHash []byte
}

// EmbeddingWrite is one vector to save.
type EmbeddingWrite struct {
	ContextID int64
	// ContentHash is the EmbeddingTarget's: a vector of text the item no
	// longer holds is not saved.
	ContentHash []byte
	// Dims is the vector's dimensions; Vector its stored form
	// (embedding.Encode).
	Dims   int
	Vector []byte
}

// StoredEmbedding is one item's current vector for a model.
type StoredEmbedding struct {
	ContextID int64
	Dims      int
	Vector    []byte
}

// usableVector is the condition on a vector row e of the model in SQL
// parameter modelParam that makes it count as the item's (or chunk's)
// vector, beside being of its current text: of the dimensions recorded for
// the model (migration 043), and not zero (scale 0: a reply of nulls or
// zeros stored before the embedding client refused them) nor of a scale
// that is not finite (a reply of tiny components, which Normalize made
// infinite before it computed in float64). Anything else
// counts as missing, so that the sweep and a backfill redo it. The
// sub-select is not correlated: Postgres evaluates it once per statement.
func usableVector(e, modelParam string) string {
	// The scale (the first 4 bytes, a little-endian float32) neither 0 nor
	// infinite or NaN (exponent bits all set: the high 7 bits of byte 3
	// and the high bit of byte 2), which an earlier release could store.
	return ofRecordedDims(e, modelParam) + fmt.Sprintf(`
			AND substring(%[1]s.vector FROM 1 FOR 4) <> '\x00000000'::bytea
			AND NOT (get_byte(%[1]s.vector, 3) & 127 = 127 AND get_byte(%[1]s.vector, 2) & 128 = 128)`, e)
}

// ofRecordedDims is the condition on a vector row e of the model in SQL
// parameter modelParam that it has the dimensions recorded for the model
// (any, while none are): vectors of others, stored by an earlier release
// when a job's halves were answered by two models, count as missing.
func ofRecordedDims(e, modelParam string) string {
	return fmt.Sprintf(` AND %[1]s.dims = coalesce((SELECT m.dims FROM embedding_models m WHERE m.model = %[2]s), %[1]s.dims)`, e, modelParam)
}

// EmbeddingDims returns the dimensions recorded for model's vectors,
// recording dims when there are none yet: the first reply's. Two workers
// recording a new model at once both get the winner's.
func (s *Store) EmbeddingDims(ctx context.Context, model string, dims int) (int, error) {
	// One statement cannot both insert and read a row another transaction
	// commits meanwhile (its snapshot predates it): read, else insert, else
	// (that insert lost to a concurrent one) read again, in a new snapshot.
	for range 2 {
		var got int
		err := s.db.QueryRow(ctx, `SELECT dims FROM embedding_models WHERE model = $1`, model).Scan(&got)
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("embedding dims: %w", err)
		}
		err = s.db.QueryRow(ctx, `INSERT INTO embedding_models (model, dims) VALUES ($1, $2)
			ON CONFLICT (model) DO NOTHING RETURNING dims`, model, dims).Scan(&got)
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("embedding dims: %w", err)
		}
	}
	return 0, fmt.Errorf("embedding dims: model %q was recorded and removed while it was read", model)
}

// SetEmbeddingDims records dims as model's, replacing what was recorded:
// the operator says the model behind the name changed, and its vectors of
// other dimensions are to be embedded anew. It returns the dimensions
// recorded before (0: none), so that the caller can tell a change from a
// run that says again what was recorded (a nightly backfill with --dims).
// recorded_at is when they last changed: the same dimensions again leave
// it (ForgetStaleEmbeddingRefusals).
func (s *Store) SetEmbeddingDims(ctx context.Context, model string, dims int) (int, error) {
	// The sub-select reads the statement's snapshot: the row as it was
	// before the update (none when the insert is the first).
	var prev pgtype.Int4
	err := s.db.QueryRow(ctx, `INSERT INTO embedding_models AS m (model, dims) VALUES ($1, $2)
		ON CONFLICT (model) DO UPDATE SET dims = excluded.dims,
			recorded_at = CASE WHEN m.dims = excluded.dims THEN m.recorded_at ELSE now() END
		RETURNING (SELECT m.dims FROM embedding_models m WHERE m.model = $1)`, model, dims).Scan(&prev)
	if err != nil {
		return 0, fmt.Errorf("set embedding dims: %w", err)
	}
	return int(prev.Int32), nil
}

// EmbeddingTargets returns those of the user's items ids that have no
// usable current vector for model (none, one of text the item no longer
// holds, or one usableVector refuses), in id order. Items gone are left
// out, and so are those whose current text the server refused for model
// (SaveEmbeddingRefusals): a job that holds one (enqueued by the sweep
// of a release before 065, or retried for another item) sent it again.
func (s *Store) EmbeddingTargets(ctx context.Context, userID string, ids []int64, model string) ([]EmbeddingTarget, error) {
	refs := make([]ContextRef, len(ids))
	for i, id := range ids {
		refs[i] = ContextRef{UserID: userID, ID: id}
	}
	return s.EmbeddingTargetsOf(ctx, refs, model)
}

// EmbeddingTargetsOf is EmbeddingTargets for items of several users, in
// one query: an item is a target only under its own user (a ref naming
// another user's item id finds nothing), in (user, id) order.
func (s *Store) EmbeddingTargetsOf(ctx context.Context, refs []ContextRef, model string) ([]EmbeddingTarget, error) {
	users, ids := make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		users[i], ids[i] = r.UserID, r.ID
	}
	rows, err := s.db.Query(ctx, `SELECT c.id, c.user_id, c.question, c.answer, c.content_hash
		FROM (SELECT DISTINCT u, i FROM unnest($1::text[], $2::bigint[]) AS r(u, i)) r
		JOIN context c ON c.user_id = r.u AND c.id = r.i
		WHERE NOT EXISTS (SELECT FROM context_embeddings e
			WHERE e.context_id = c.id AND e.model = $3 AND e.content_hash = c.content_hash`+usableVector("e", "$3")+`)
		  AND NOT `+refusedItem("c", "$3")+`
		ORDER BY c.user_id, c.id`, users, ids, model)
	if err != nil {
		return nil, fmt.Errorf("embedding targets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (EmbeddingTarget, error) {
		var t EmbeddingTarget
		err := r.Scan(&t.ID, &t.UserID, &t.Question, &t.Answer, &t.ContentHash)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("embedding targets: %w", err)
	}
	return out, nil
}

// SaveEmbeddings saves vectors of model, replacing an item's earlier vector
// of the same model. A vector whose item is gone, or whose ContentHash is no
// longer the item's (edited meanwhile), is skipped. It returns how many were
// saved.
func (s *Store) SaveEmbeddings(ctx context.Context, model string, ws []EmbeddingWrite) (int64, error) {
	if len(ws) == 0 {
		return 0, nil
	}
	ids, hashes, dims, vecs := make([]int64, len(ws)), make([][]byte, len(ws)), make([]int32, len(ws)), make([][]byte, len(ws))
	for i, w := range ws {
		ids[i], hashes[i], dims[i], vecs[i] = w.ContextID, w.ContentHash, int32(w.Dims), w.Vector
	}
	// The items are locked (KEY SHARE, which only a delete waits on)
	// before the insert: an item whose delete (prune, clear, forget) is
	// in flight is waited for and, once it commits, left out. Joined
	// without the lock, the statement saw the item in its snapshot, and
	// the foreign key check then failed the whole batch. A reset of every
	// user in flight is waited for first (lockResets): its delete of the
	// items goes in the table's order, this lock in id order, and the two
	// could each hold a row the other waits for. The vectors are written
	// in id order too, whatever the caller's: a hash join of live with w
	// (the plan of four items and more) wrote them in w's, and two saves
	// of the same items in other orders each held a vector the other
	// waited for (TestEmbedSavesInOppositeOrders).
	var saved int64
	err := s.inTx(ctx, func(q *Store) error {
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		// The insert's triggers bump its users' embedding generations
		// (021) in two firings, each in user order: those of the vectors
		// it replaced (AFTER UPDATE, first), then those of the vectors it
		// inserted. A save replacing b's vector and inserting a's took
		// b's row before a's, and a prune (which waits for its victims'
		// users' rows in user order) held a's and waited for b's (40P01;
		// TestPruneBesideSaveReplacingAVector). So the rows are bumped
		// first, in user order, after the items' locks (id order) as
		// every writer takes them; the triggers then find them held.
		if _, err := q.db.Exec(ctx, `
		WITH live AS (
			SELECT c.user_id FROM context c JOIN unnest($1::bigint[], $2::bytea[]) AS w(id, h) ON c.id = w.id AND c.content_hash = w.h
			ORDER BY c.id
			FOR KEY SHARE OF c
		)
		INSERT INTO embedding_generations AS g (user_id, generation)
		SELECT u, nextval('embedding_generation_seq') FROM (SELECT DISTINCT user_id AS u FROM live ORDER BY 1) x
		ON CONFLICT (user_id) DO UPDATE SET generation = excluded.generation`, ids, hashes); err != nil {
			return err
		}
		tag, err := q.db.Exec(ctx, `
		WITH w AS (
			SELECT * FROM unnest($2::bigint[], $3::bytea[], $4::int[], $5::bytea[]) AS w(id, h, d, v)
		), live AS (
			SELECT c.id, c.user_id, c.content_hash FROM context c JOIN w ON c.id = w.id AND c.content_hash = w.h
			ORDER BY c.id
			FOR KEY SHARE OF c
		)
		INSERT INTO context_embeddings AS e (context_id, model, user_id, content_hash, dims, vector)
		SELECT live.id, $1, live.user_id, live.content_hash, w.d, w.v
		FROM live JOIN w ON w.id = live.id AND w.h = live.content_hash
		ORDER BY live.id
		ON CONFLICT (context_id, model) DO UPDATE
			SET content_hash = excluded.content_hash, dims = excluded.dims, vector = excluded.vector, created_at = now()`,
			model, ids, hashes, dims, vecs)
		saved = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("save embeddings: %w", err)
	}
	return saved, nil
}

// UserEmbeddings returns, in one query, the user's current vectors for
// model (those of the text each item holds now), in item id order: what
// ranking scores a query vector against. Vectors of several dimensions may
// come back after the model behind a name changed; the reader keeps those of
// its query's.
func (s *Store) UserEmbeddings(ctx context.Context, userID, model string) ([]StoredEmbedding, error) {
	rows, err := s.db.Query(ctx, `SELECT e.context_id, e.dims, e.vector FROM context_embeddings e
		JOIN context c ON c.id = e.context_id AND c.content_hash = e.content_hash
		WHERE e.user_id = $1 AND e.model = $2
		ORDER BY e.context_id`, userID, model)
	if err != nil {
		return nil, fmt.Errorf("user embeddings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredEmbedding, error) {
		var e StoredEmbedding
		err := r.Scan(&e.ContextID, &e.Dims, &e.Vector)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("user embeddings: %w", err)
	}
	return out, nil
}

// MissingEmbeddings returns up to limit items without a usable current
// vector for model (as EmbeddingTargets), of userID (of every user when empty), with ids above afterID, in id
// order: a backfill pages through them by passing the last id back.
// Items whose current text the server refused for model
// (SaveEmbeddingRefusals) are left out: the sweep sent them again every
// hour, refused each time.
func (s *Store) MissingEmbeddings(ctx context.Context, userID, model string, afterID int64, limit int) ([]ContextRef, error) {
	rows, err := s.db.Query(ctx, `SELECT c.user_id, c.id FROM context c
		WHERE ($1 = '' OR c.user_id = $1) AND c.id > $3
		  AND NOT EXISTS (SELECT FROM context_embeddings e
			WHERE e.context_id = c.id AND e.model = $2 AND e.content_hash = c.content_hash`+usableVector("e", "$2")+`)
		  AND NOT `+refusedItem("c", "$2")+`
		ORDER BY c.id LIMIT $4`, userID, model, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("missing embeddings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ContextRef, error) {
		var ref ContextRef
		err := r.Scan(&ref.UserID, &ref.ID)
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("missing embeddings: %w", err)
	}
	return out, nil
}

// EmbeddingCount is how many context items there are, and how many of them
// have a current vector for a model.
type EmbeddingCount struct {
	Items, Embedded int64
	// Refused is how many of the items without one the embeddings server
	// refused (SaveEmbeddingRefusals): no job sends them again until
	// their text or the model changes, or a backfill with
	// --retry-refused. For document chunks, the chunks recorded so
	// (SaveChunkEmbeddingRefusals).
	Refused int64
}

// CountEmbeddings counts userID's items (every user's when empty) and those
// with a usable current vector for model (as EmbeddingTargets).
func (s *Store) CountEmbeddings(ctx context.Context, userID, model string) (EmbeddingCount, error) {
	return s.CountEmbeddingsAt(ctx, userID, model, EmbeddingMark{})
}

// CountUserEmbeddings is CountEmbeddings of one user's items, in a
// statement of its own: under a generic plan (pgx prepares, and Postgres
// may keep one after five runs) CountEmbeddings' "$1 = ” OR user_id =
// $1" reads every user's items, where this walks the user's through
// context_user_id_idx (the stats of memory.stats, as Stats).
func (s *Store) CountUserEmbeddings(ctx context.Context, userID, model string) (EmbeddingCount, error) {
	var n EmbeddingCount
	err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE `+hasVector("c", "$2")+`),
			(SELECT count(*) FROM embedding_refusals r JOIN context c ON c.id = r.context_id AND c.content_hash = r.content_hash
			 WHERE r.model = $2 AND c.user_id = $1 AND NOT `+hasVector("c", "$2")+`)
		FROM context c WHERE c.user_id = $1`, userID, model).Scan(&n.Items, &n.Embedded, &n.Refused)
	if err != nil {
		return EmbeddingCount{}, fmt.Errorf("count user embeddings: %w", err)
	}
	return n, nil
}

// CountRefusedEmbeddings counts the items, every user's, whose current
// text the server refused for model (SaveEmbeddingRefusals) and that have
// no vector of it, as CountEmbeddings' Refused does: one read of
// embedding_refusals, which holds only refusals, joined to their items
// (the metrics' gauge, each scrape). A refusal row outlives a vector
// saved later for the same text (a job's retry once the server took
// longer texts, a serve of a release before 065, whose sweep sends
// refused texts again): such an item is not counted.
func (s *Store) CountRefusedEmbeddings(ctx context.Context, model string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM embedding_refusals r
		JOIN context c ON c.id = r.context_id AND c.content_hash = r.content_hash
		WHERE r.model = $1 AND NOT `+hasVector("c", "$1"), model).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count refused embeddings: %w", err)
	}
	return n, nil
}

// EmbeddingMark bounds a count of vectors to the items and documents that
// existed at one moment (MarkEmbeddings): a wait for them ends even while
// new ones keep arriving. The zero mark bounds nothing.
type EmbeddingMark struct {
	set        bool
	contextID  int64     // the highest item id then
	docsBefore time.Time // the database's time then
}

// MarkEmbeddings returns the mark of now.
func (s *Store) MarkEmbeddings(ctx context.Context) (EmbeddingMark, error) {
	m := EmbeddingMark{set: true}
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(id), 0), now() FROM context`).Scan(&m.contextID, &m.docsBefore); err != nil {
		return EmbeddingMark{}, fmt.Errorf("mark embeddings: %w", err)
	}
	return m, nil
}

// CountEmbeddingsAt is CountEmbeddings of the items up to mark.
func (s *Store) CountEmbeddingsAt(ctx context.Context, userID, model string, mark EmbeddingMark) (EmbeddingCount, error) {
	var n EmbeddingCount
	err := s.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE `+hasVector("c", "$2")+`),
			(SELECT count(*) FROM embedding_refusals r JOIN context c ON c.id = r.context_id AND c.content_hash = r.content_hash
			 WHERE r.model = $2 AND ($1 = '' OR c.user_id = $1) AND (NOT $3 OR c.id <= $4) AND NOT `+hasVector("c", "$2")+`)
		FROM context c WHERE ($1 = '' OR c.user_id = $1) AND (NOT $3 OR c.id <= $4)`,
		userID, model, mark.set, mark.contextID).Scan(&n.Items, &n.Embedded, &n.Refused)
	if err != nil {
		return EmbeddingCount{}, fmt.Errorf("count embeddings: %w", err)
	}
	return n, nil
}

// hasVector is the condition on an item row c that it has a usable
// vector of its current text for the model in SQL parameter modelParam.
// The counts read it once an item and count the refused from
// embedding_refusals apart: a subquery's column "embedded" read by two
// FILTERs was inlined into both, two probes of context_embeddings an
// item (401,596 buffers for a 50,000-item user's stats, 196,095 before
// the refused were counted, 198,726 so).
func hasVector(c, modelParam string) string {
	return fmt.Sprintf(`EXISTS (SELECT FROM context_embeddings e
			WHERE e.context_id = %[1]s.id AND e.model = %[2]s AND e.content_hash = %[1]s.content_hash`, c, modelParam) + usableVector("e", modelParam) + ")"
}

// refusedItem is the condition on an item row c (with id and
// content_hash) that the embeddings server refused its current text for
// the model in SQL parameter modelParam (migration 065).
func refusedItem(c, modelParam string) string {
	return fmt.Sprintf(`EXISTS (SELECT FROM embedding_refusals r
			WHERE r.context_id = %[1]s.id AND r.model = %[2]s AND r.content_hash = %[1]s.content_hash)`, c, modelParam)
}

// EmbeddingRefusal is an item whose text the embeddings server refused as
// input, and the content hash of that text.
type EmbeddingRefusal struct {
	ContextID   int64
	ContentHash []byte
}

// SaveEmbeddingRefusals records that the embeddings server refused the
// items' texts for model (as input, or by answering them with vectors of
// other dimensions than the model's: no vector it can use either), so that MissingEmbeddings (the sweep, a
// backfill) leaves them out until the item's text changes (another
// content hash) or the model does. A refusal of an item gone, or of text
// it no longer holds, is skipped. It returns how many were recorded.
func (s *Store) SaveEmbeddingRefusals(ctx context.Context, model string, rs []EmbeddingRefusal) (int64, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	ids, hashes := make([]int64, len(rs)), make([][]byte, len(rs))
	for i, r := range rs {
		ids[i], hashes[i] = r.ContextID, r.ContentHash
	}
	var saved int64
	// As SaveEmbeddings: a reset in flight is waited for first, then the
	// items are locked (KEY SHARE) in id order, so that an item whose
	// delete is in flight is waited for and left out rather than failing
	// the foreign key check.
	err := s.inTx(ctx, func(q *Store) error {
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		tag, err := q.db.Exec(ctx, `
		WITH live AS (
			SELECT c.id, c.content_hash FROM context c JOIN unnest($2::bigint[], $3::bytea[]) AS w(id, h) ON c.id = w.id AND c.content_hash = w.h
			ORDER BY c.id
			FOR KEY SHARE OF c
		)
		INSERT INTO embedding_refusals AS r (context_id, model, content_hash)
		SELECT live.id, $1, live.content_hash FROM live ORDER BY live.id
		ON CONFLICT (context_id, model) DO UPDATE SET content_hash = excluded.content_hash, refused_at = now()`,
			model, ids, hashes)
		saved = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("save embedding refusals: %w", err)
	}
	return saved, nil
}

// ForgetEmbeddingRefusals deletes the refusals recorded for model of
// userID's items (every user's when empty), so that MissingEmbeddings
// finds those items again (`memoryd embed --backfill --retry-refused`:
// the server now takes longer texts), and returns how many of them were
// of the items' current texts (those a refusal left out; one of a text
// since edited left out nothing).
func (s *Store) ForgetEmbeddingRefusals(ctx context.Context, userID, model string) (int64, error) {
	var n int64
	err := s.db.QueryRow(ctx, `WITH d AS (DELETE FROM embedding_refusals r USING context c
		WHERE r.context_id = c.id AND r.model = $2 AND ($1 = '' OR c.user_id = $1)
		RETURNING r.content_hash = c.content_hash AS current)
		SELECT count(*) FILTER (WHERE current) FROM d`, userID, model).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("forget embedding refusals: %w", err)
	}
	return n, nil
}

// ForgetStaleEmbeddingRefusals deletes the refusals recorded for model
// before its dimensions last changed (SetEmbeddingDims: the model behind
// the name changed, and the new one may take those texts), of user's
// items and of the document chunks of the collections user owns (every
// user's when empty). The refusals of the model since stay: a backfill
// that records the same dimensions again, of another user or after one
// interrupted before it forgot, forgets what the old model refused and
// no more. It returns how many items and chunks were of their current
// text, as ForgetEmbeddingRefusals and ForgetChunkEmbeddingRefusals do.
func (s *Store) ForgetStaleEmbeddingRefusals(ctx context.Context, user, model string) (items, chunks int64, err error) {
	err = s.db.QueryRow(ctx, `WITH d AS (DELETE FROM embedding_refusals r USING context c, embedding_models m
		WHERE r.context_id = c.id AND r.model = $2 AND ($1 = '' OR c.user_id = $1)
		  AND m.model = r.model AND r.refused_at < m.recorded_at
		RETURNING r.content_hash = c.content_hash AS current)
		SELECT count(*) FILTER (WHERE current) FROM d`, user, model).Scan(&items)
	if err != nil {
		return 0, 0, fmt.Errorf("forget stale embedding refusals: %w", err)
	}
	if chunks, err = s.forgetChunkRefusals(ctx, user, model, true); err != nil {
		return 0, 0, fmt.Errorf("forget stale chunk embedding refusals: %w", err)
	}
	return items, chunks, nil
}

// UserVectors is a user's current vectors of one model, as a process caches
// them: the item ids with each item's time and scope (so that a cached
// search keeps to a range and a scope), and the generation they were read
// at, in the same snapshot.
type UserVectors struct {
	// Generation is the user's embedding generation (migrations/021) when
	// the vectors were read; a hybrid Recall's Candidates.Generation equal
	// to it says they are still exactly the user's current vectors.
	Generation int64
	// Vectors are in item id order.
	Vectors []UserVector
}

// UserVector is one item's current vector with what a cached search
// filters on.
type UserVector struct {
	ContextID int64
	CreatedAt time.Time
	Scope     string
	Dims      int
	// Vector is the stored form (embedding.Decode); the vectors of one read
	// share one allocation.
	Vector []byte
}

// userVectorsSQL reads the generation (a first row with a NULL id) and the
// vectors in one statement, so from one snapshot. Through
// context_embeddings_user_model_idx; the join drops vectors of text an item
// no longer holds, and ofRecordedDims vectors of other dimensions than
// those recorded for the model.
var userVectorsSQL = `
	SELECT (SELECT generation FROM embedding_generations WHERE user_id = $1), NULL::bigint, NULL::timestamptz,
		NULL::text, NULL::int, NULL::bytea
	UNION ALL
	(SELECT NULL, e.context_id, c.created_at, c.scope, e.dims, e.vector FROM context_embeddings e
	JOIN context c ON c.id = e.context_id AND c.content_hash = e.content_hash
	WHERE e.user_id = $1 AND e.model = $2` + ofRecordedDims("e", "$2") + `
	ORDER BY e.context_id)`

// UserVectors returns the user's current vectors of model and their
// generation, in one query.
func (s *Store) UserVectors(ctx context.Context, userID, model string) (UserVectors, error) {
	rows, err := s.db.Query(ctx, userVectorsSQL, userID, model)
	if err != nil {
		return UserVectors{}, fmt.Errorf("user vectors: %w", err)
	}
	defer rows.Close()
	var (
		out   UserVectors
		gen   pgtype.Int8
		id    pgtype.Int8
		v     UserVector
		at    pgtype.Timestamptz
		scope pgtype.Text
		dims  pgtype.Int4
		vec   pgtype.DriverBytes // valid until the next row: copied
		arena []byte
		spans []span
	)
	for rows.Next() {
		if err := rows.Scan(&gen, &id, &at, &scope, &dims, &vec); err != nil {
			return UserVectors{}, fmt.Errorf("user vectors: %w", err)
		}
		if !id.Valid {
			out.Generation = gen.Int64
			continue
		}
		v.ContextID, v.CreatedAt, v.Scope, v.Dims = id.Int64, at.Time, scope.String, int(dims.Int32)
		out.Vectors = append(out.Vectors, v)
		spans = append(spans, push(&arena, vec))
	}
	if err := rows.Err(); err != nil {
		return UserVectors{}, fmt.Errorf("user vectors: %w", err)
	}
	for i := range out.Vectors {
		out.Vectors[i].Vector = spans[i].of(arena)
	}
	return out, nil
}

// ExistingContext returns those of refs whose item still exists, in order:
// read again under the users' locks (LockUsers), it leaves out what a
// forget that committed since refs were read deleted.
func (s *Store) ExistingContext(ctx context.Context, refs []ContextRef) ([]ContextRef, error) {
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.ID
	}
	rows, err := s.db.Query(ctx, `SELECT id FROM context WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("existing context: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("existing context: %w", err)
	}
	have := make(map[int64]bool, len(found))
	for _, id := range found {
		have[id] = true
	}
	out := refs[:0:0]
	for _, r := range refs {
		if have[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}

// EmbeddingModels returns the models whose vectors the database has held
// (embedding_models), the most recently recorded first.
func (s *Store) EmbeddingModels(ctx context.Context) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT model FROM embedding_models ORDER BY recorded_at DESC, model`)
	if err != nil {
		return nil, fmt.Errorf("embedding models: %w", err)
	}
	models, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("embedding models: %w", err)
	}
	return models, nil
}
