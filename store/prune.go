package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// SizeReport is what the pruner measures.
//
// Postgres does not shrink a table's files when rows are deleted or values
// emptied; VACUUM makes the space reusable. So the live size is estimated:
// the context table with its items' terms (context_terms, deleted with
// their items) at its real size scaled by rows over its high-water row
// count, the most row versions the table held (live rows plus the dead ones
// Postgres's statistics count: a reset that deletes every item and extracts
// them again doubles the files without ever holding more live rows, and
// that space is reusable too), the items' vectors (context_embeddings) the
// same way by their own rows and high water (a re-embed replaces vectors
// without adding items, migration 046), the turns
// table at its real size less the turn text it no longer holds (text high
// water minus current text), or by its rows over its high water when that
// is less (a replay's rewrites of every turn, migration 062), facts, list items, fact history and the
// clears (fact and context tombstones) at their real size.
//
// The JSON tags name the fields of the prune job's recorded output (River
// keeps worker.PruneReport, which holds two SizeReports, with the job); no
// reply on the wire carries a SizeReport.
type SizeReport struct {
	// RealBytes is the on-disk size of memoryd's tables (turns, facts,
	// fact_items, fact_history, the clears, context, context_embeddings,
	// the knowledge bases) including indexes and TOAST.
	RealBytes int64 `json:"real_bytes"`
	// ContextBytes is the real size of the context table and of its items'
	// terms, indexes and TOAST included.
	ContextBytes int64 `json:"context_bytes"`
	// VectorBytes is the live size of the context items' vectors
	// (context_embeddings, every model's): the table's real size scaled by
	// its rows over the most row versions it has held. Deleting an item
	// deletes its vectors, so they count in ContextLiveBytes.
	VectorBytes int64 `json:"vector_bytes"`
	// VectorRows counts the items' vectors, every model's.
	VectorRows int64 `json:"vector_rows"`
	// ContextRows counts context items; ContextDead is the dead row
	// versions the table holds (Postgres's statistics, until VACUUM);
	// HighWater is the most row versions, live and dead, there were.
	ContextRows int64 `json:"context_rows"`
	ContextDead int64 `json:"context_dead"`
	HighWater   int64 `json:"high_water"`
	// TurnsBytes is the turns table's real size, indexes and TOAST included.
	TurnsBytes int64 `json:"turns_bytes"`
	// TurnRows counts the turns; TurnsHighWater is the most row versions,
	// live and dead, the turns table has held (a replay rewrites every
	// turn it reads, leaving dead versions whose space is reusable).
	TurnRows       int64 `json:"turn_rows"`
	TurnsHighWater int64 `json:"turns_high_water"`
	// TurnTextBytes is the stored size of the text (message, response,
	// metadata) of the turns that still hold it; TurnTextHighWater the most
	// there was.
	TurnTextBytes     int64 `json:"turn_text_bytes"`
	TurnTextHighWater int64 `json:"turn_text_high_water"`
	// DocumentBytes is the live size of the knowledge bases (collections,
	// documents, their chunks, chunk terms and chunk vectors, read grants,
	// default collections; indexes and TOAST included): the documents,
	// chunks, terms and vectors tables each count their real size scaled
	// by their live rows over the most row versions they have held (see
	// migration 045), so documents deleted count for nothing.
	// Pruning never deletes documents: they count in LiveBytes and
	// FloorBytes (and at their real size in RealBytes).
	DocumentBytes int64 `json:"document_bytes"`
	// LiveBytes estimates the size in use, the figure compared with the
	// size limit.
	LiveBytes int64 `json:"live_bytes"`
	// FloorBytes is LiveBytes without any context item and without any turn
	// text: facts, list items, fact history, clears, documents, the turn
	// rows themselves and the indexes.
	// Pruning cannot go under it.
	FloorBytes int64 `json:"floor_bytes"`
}

// BytesPerContextRow is what deleting one context item frees for reuse:
// the context table's real size per row version at its high water mark,
// and the item's share of the live vectors.
func (r SizeReport) BytesPerContextRow() float64 {
	if r.HighWater == 0 {
		return 0
	}
	b := float64(r.ContextBytes) / float64(r.HighWater)
	if r.ContextRows > 0 {
		b += float64(r.VectorBytes) / float64(r.ContextRows)
	}
	return b
}

// ContextLiveBytes is the live size of the context items with their terms
// and vectors: what deleting every context item would free.
func (r SizeReport) ContextLiveBytes() int64 {
	if r.HighWater == 0 {
		return r.VectorBytes
	}
	return int64(math.Round(float64(r.ContextRows)*float64(r.ContextBytes)/float64(r.HighWater))) + r.VectorBytes
}

// MeasureSize measures memoryd's tables and raises the high water marks. It
// counts the turns and the stored size of the text of those that still
// hold it (the row, not its TOAST), so it costs a scan of the turns table.
func (s *Store) MeasureSize(ctx context.Context) (SizeReport, error) {
	var (
		r                            SizeReport
		docsFixed, termsSize         int64
		colls, docs, chunks, vectors tableSize
		itemVectors                  tableSize
		turnsMain                    int64
	)
	err := s.db.QueryRow(ctx, `
		WITH sz AS (
			SELECT pg_total_relation_size('turns'::regclass) AS turns,
			       pg_relation_size('turns'::regclass) + pg_indexes_size('turns'::regclass) AS turns_main,
			       pg_total_relation_size('facts'::regclass) + pg_total_relation_size('fact_items'::regclass) + pg_total_relation_size('fact_history'::regclass)
			         + pg_total_relation_size('fact_clears'::regclass) + pg_total_relation_size('fact_value_clears'::regclass)
			         + pg_total_relation_size('fact_direct_clears'::regclass) + pg_total_relation_size('fact_import_clears'::regclass)
			         + pg_total_relation_size('context_clears'::regclass) AS other,
			       pg_total_relation_size('context'::regclass) + pg_total_relation_size('context_terms'::regclass) AS ctx,
			       pg_total_relation_size('context_embeddings'::regclass) AS v_size, (SELECT count(*) FROM context_embeddings) AS v_rows,
			       pg_stat_get_dead_tuples('context_embeddings'::regclass) AS v_dead,
			       pg_total_relation_size('collection_readers'::regclass)
			         + pg_total_relation_size('doc_defaults'::regclass) + pg_total_relation_size('chunk_embedding_generations'::regclass) AS docs_fixed,
			       (SELECT count(*) FROM context) AS rows,
			       pg_stat_get_dead_tuples('context'::regclass) AS dead,
			       t.text, t.rows AS t_rows, pg_stat_get_dead_tuples('turns'::regclass) AS t_dead
			FROM (SELECT count(*) AS rows, coalesce(sum(`+turnTextSize+`) FILTER (WHERE text_cleared_at IS NULL), 0) AS text FROM turns) t
		), dt AS (
			SELECT pg_total_relation_size('collections'::regclass) AS l_size, (SELECT count(*) FROM collections) AS l_rows,
			       pg_stat_get_dead_tuples('collections'::regclass) AS l_dead,
			       pg_total_relation_size('documents'::regclass) AS d_size, (SELECT count(*) FROM documents) AS d_rows,
			       pg_stat_get_dead_tuples('documents'::regclass) AS d_dead,
			       pg_total_relation_size('doc_chunks'::regclass) AS c_size, (SELECT count(*) FROM doc_chunks) AS c_rows,
			       pg_stat_get_dead_tuples('doc_chunks'::regclass) AS c_dead,
			       pg_total_relation_size('chunk_embeddings'::regclass) AS e_size, (SELECT count(*) FROM chunk_embeddings) AS e_rows,
			       pg_stat_get_dead_tuples('chunk_embeddings'::regclass) AS e_dead,
			       pg_total_relation_size('chunk_terms'::regclass) AS t_size
		), hw AS (
			UPDATE prune_state SET context_high_water = greatest(context_high_water, (SELECT rows + dead FROM sz)),
			                       turn_text_high_water = greatest(turn_text_high_water, (SELECT text FROM sz)),
			                       turns_high_water = greatest(turns_high_water, (SELECT t_rows + t_dead FROM sz)),
			                       collections_high_water = greatest(collections_high_water, (SELECT l_rows + l_dead FROM dt)),
			                       documents_high_water = greatest(documents_high_water, (SELECT d_rows + d_dead FROM dt)),
			                       doc_chunks_high_water = greatest(doc_chunks_high_water, (SELECT c_rows + c_dead FROM dt)),
			                       chunk_embeddings_high_water = greatest(chunk_embeddings_high_water, (SELECT e_rows + e_dead FROM dt)),
			                       context_embeddings_high_water = greatest(context_embeddings_high_water, (SELECT v_rows + v_dead FROM sz))
			RETURNING context_high_water, turn_text_high_water, turns_high_water, collections_high_water, documents_high_water, doc_chunks_high_water, chunk_embeddings_high_water,
			          context_embeddings_high_water
		)
		SELECT turns + other + ctx + v_size + docs_fixed + l_size + d_size + c_size + e_size + t_size, ctx, rows, dead, hw.context_high_water, turns, text, hw.turn_text_high_water,
		       t_rows, hw.turns_high_water, turns_main,
		       docs_fixed, l_size, l_rows, hw.collections_high_water, d_size, d_rows, hw.documents_high_water, c_size, c_rows, hw.doc_chunks_high_water, e_size, e_rows, hw.chunk_embeddings_high_water, t_size,
		       v_size, v_rows, hw.context_embeddings_high_water
		FROM sz, dt, hw`).
		Scan(&r.RealBytes, &r.ContextBytes, &r.ContextRows, &r.ContextDead, &r.HighWater, &r.TurnsBytes, &r.TurnTextBytes, &r.TurnTextHighWater,
			&r.TurnRows, &r.TurnsHighWater, &turnsMain,
			&docsFixed, &colls.size, &colls.rows, &colls.hw, &docs.size, &docs.rows, &docs.hw, &chunks.size, &chunks.rows, &chunks.hw, &vectors.size, &vectors.rows, &vectors.hw, &termsSize,
			&itemVectors.size, &itemVectors.rows, &itemVectors.hw)
	if err != nil {
		return r, fmt.Errorf("measure size: %w", err)
	}
	// The documents count at their live size, not at the real size of
	// their files: each table's real size scaled by its rows over the most
	// it held, the chunk terms by the chunks'.
	r.DocumentBytes = docsFixed + colls.live() + docs.live() + chunks.live() + vectors.live() + int64(math.Round(float64(termsSize)*chunks.fraction()))
	docsReal := docsFixed + colls.size + docs.size + chunks.size + vectors.size + termsSize
	// The items' vectors count with the items (ContextLiveBytes), at their
	// live size; the documents at theirs (DocumentBytes), not at the real
	// size of their files.
	r.VectorBytes, r.VectorRows = itemVectors.live(), itemVectors.rows
	other := r.RealBytes - r.ContextBytes - itemVectors.size - r.TurnsBytes - docsReal + r.DocumentBytes
	// Text cleared since the high water left that much reusable space in
	// the turns table, and so did the dead versions of the turns a replay
	// rewrote; the text still held is in use whatever the files say. The
	// versions scale the heap and its indexes (rows over the most versions
	// they held), not the TOAST: an update that leaves the text as it was
	// (a replay's status changes) shares its TOAST value with the old
	// version, so the TOAST holds one copy of live text however many
	// versions the heap holds. The indexes grow less than the heap (a HOT
	// update adds no entry), so after a replay they count under their
	// packed size (about 0.6 of it: a review); counted whole, the turns of
	// short messages counted 1.34 times their packed size, and pruning
	// deletes memory for what is over, where an undercount of part of the
	// indexes lets the files grow past the limit by that part. The cleared
	// text comes off the TOAST, where long text is (short text, in the
	// heap, is the dead versions'). Both estimates count the reusable
	// space of one kind or the other: the smaller holds.
	cleared := max(r.TurnTextHighWater-r.TurnTextBytes, 0)
	turns := tableSize{size: turnsMain, rows: r.TurnRows, hw: r.TurnsHighWater}
	turnsLive := max(min(r.TurnsBytes-cleared, turns.live()+max(r.TurnsBytes-turnsMain-cleared, 0)), r.TurnTextBytes)
	r.LiveBytes = other + turnsLive + r.ContextLiveBytes()
	r.FloorBytes = other + turnsLive - r.TurnTextBytes
	return r, nil
}

// tableSize is a table's real size, its rows and the most row versions it
// has held (its high water).
type tableSize struct{ size, rows, hw int64 }

// fraction is the share of the table's files its rows use.
func (t tableSize) fraction() float64 {
	if t.rows <= 0 {
		return 0
	}
	return float64(t.rows) / float64(max(t.hw, t.rows))
}

// live is the size the table's rows use.
func (t tableSize) live() int64 { return int64(math.Round(float64(t.size) * t.fraction())) }

// SampleContextHighWater raises the high-water marks (see SizeReport) of
// the context table, of its items' vectors (migration 046), of the turns
// table (062: the versions a replay's rewrites leave) and of the
// knowledge-base tables (045) to the row versions, live and dead, that
// Postgres's statistics count in them now. It reads no row, so it can run
// often: the dead rows of a reset, or of deleted documents, are reusable
// space once a VACUUM (autovacuum's) reclaims them, but the files keep
// their size, and a MeasureSize that comes after the VACUUM no longer sees
// them. Not in a deleting transaction: prune_state is one row, which every
// deletion would then wait on.
func (s *Store) SampleContextHighWater(ctx context.Context) error {
	_, err := s.db.Exec(ctx, `UPDATE prune_state SET
		context_high_water = greatest(context_high_water, `+statVersions("context")+`),
		turns_high_water = greatest(turns_high_water, `+statVersions("turns")+`),
		context_embeddings_high_water = greatest(context_embeddings_high_water, `+statVersions("context_embeddings")+`),
		collections_high_water = greatest(collections_high_water, `+statVersions("collections")+`),
		documents_high_water = greatest(documents_high_water, `+statVersions("documents")+`),
		doc_chunks_high_water = greatest(doc_chunks_high_water, `+statVersions("doc_chunks")+`),
		chunk_embeddings_high_water = greatest(chunk_embeddings_high_water, `+statVersions("chunk_embeddings")+`)`)
	if err != nil {
		return fmt.Errorf("sample high water: %w", err)
	}
	return nil
}

// statVersions is the row versions, live and dead, Postgres's statistics
// count in table.
func statVersions(table string) string {
	return `pg_stat_get_live_tuples('` + table + `'::regclass) + pg_stat_get_dead_tuples('` + table + `'::regclass)`
}

// turnTextSize is the stored size (after compression, TOAST included) of a
// turn's text columns, read without fetching TOAST.
const turnTextSize = `pg_column_size(user_message) + pg_column_size(assistant_response) + coalesce(pg_column_size(metadata), 0)`

// ClearTurnText empties the text (message, response, metadata) of up to n
// processed turns that were processed more than retention ago, oldest first,
// keeping the rows, their status and their event ids. Pending and failed
// turns keep their text (extraction and retry read it); a replay writes the
// text back from the stream (RequeueTurns). Rows locked by a concurrent
// replay or extraction are skipped. It returns how many turns it cleared and
// the stored bytes their text took.
func (s *Store) ClearTurnText(ctx context.Context, retention time.Duration, n int) (turns, bytes int64, err error) {
	return s.clearTurnText(ctx, retention, n, RiverJobs{}, "{}", 0, nil)
}

// ClearTurnTextForSize is ClearTurnText for the size limit: of the
// processed turns that the stream stored more than minAge ago (their
// stream_stored_at, or received_at when not known), whatever the retention
// and however lately they were processed (a replay processes old turns
// again, and their text is no conversation under way: judged by
// processed_at, a replay's turns were all spared for minAge, and the limit
// deleted users' memory instead), sparing the
// processed turns that a live job of jobs (available, pending, retryable,
// running or scheduled) whose arguments contain waiting (a JSON object)
// names: turns the spend caps sent to the offline extractor wait,
// processed, for the job that extracts them again with the model at the
// next midnight, which reads their text (OfflineTurns). It stops once the
// turns it cleared hold maxBytes (the one that reaches it included), so
// that the last batch of a prune clears what the excess needs, not up to n
// turns more; maxBytes 0 or less clears nothing.
func (s *Store) ClearTurnTextForSize(ctx context.Context, minAge time.Duration, jobs RiverJobs, waiting string, n int, maxBytes int64) (turns, bytes int64, err error) {
	if maxBytes <= 0 {
		return 0, 0, nil
	}
	return s.clearTurnText(ctx, 0, n, jobs, waiting, maxBytes, &minAge)
}

// clearTurnText clears up to n turns' text, and with maxBytes > 0 no more
// turns than reach maxBytes stored bytes, oldest first (by processed_at).
// With storedAge set it spares turns the stream stored within it.
func (s *Store) clearTurnText(ctx context.Context, retention time.Duration, n int, jobs RiverJobs, waiting string, maxBytes int64, storedAge *time.Duration) (turns, bytes int64, err error) {
	err = s.db.QueryRow(ctx, `
		WITH waiting AS MATERIALIZED (
			SELECT DISTINCT coalesce(j.args->>$4::text, '') AS user_id, e.event_id
			FROM river_job j, jsonb_array_elements_text(j.args->$5::text) AS e(event_id)
			WHERE $3::text <> '' AND j.kind = $3 AND j.state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
			  AND j.args @> $6::jsonb AND e.event_id IS NOT NULL
		), expired AS (
			-- NOT IN over the CTE is a hashed subplan whatever the planner
			-- estimates: a NOT EXISTS was planned as a nested loop that
			-- read every waiting turn for each turn (1.6 s a batch with
			-- 50,000 turns waiting, 0.1 s so).
			SELECT t.user_id, t.event_id, t.processed_at, `+turnTextSize+` AS size FROM turns t
			WHERE t.status = 'processed' AND t.text_cleared_at IS NULL AND t.processed_at < now() - $1::interval
			  AND ($8::interval IS NULL OR coalesce(t.stream_stored_at, t.received_at) < now() - $8::interval)
			  AND (t.user_id, t.event_id) NOT IN (SELECT w.user_id, w.event_id FROM waiting w)
			  AND t.event_id NOT IN (SELECT w.event_id FROM waiting w WHERE w.user_id = '')
			ORDER BY t.processed_at LIMIT $2
			FOR UPDATE OF t SKIP LOCKED
		), enough AS (
			-- The running sum is apart from the locking read, which takes
			-- no window function: the rows locked past the bound are only
			-- locked, until the statement ends.
			SELECT user_id, event_id, size FROM (
				SELECT e.*, sum(e.size) OVER (ORDER BY e.processed_at, e.user_id, e.event_id ROWS UNBOUNDED PRECEDING) - e.size AS before
				FROM expired e) x
			WHERE $7::int8 <= 0 OR x.before < $7
		), cleared AS (
			UPDATE turns t SET user_message = '', assistant_response = '', metadata = NULL, text_cleared_at = now()
			FROM enough WHERE t.user_id = enough.user_id AND t.event_id = enough.event_id
			RETURNING enough.size
		)
		SELECT count(*), coalesce(sum(size), 0) FROM cleared`, retention, n, jobs.Kind, jobs.UserField, jobs.EventIDsField, waiting, maxBytes, storedAge).Scan(&turns, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("clear turn text: %w", err)
	}
	return turns, bytes, nil
}

// DeleteOldestContext deletes up to n of the oldest context items over all
// users. It returns how many it deleted. An item a concurrent insert or
// store is deduplicating against is never deleted (see chooseVictims).
func (s *Store) DeleteOldestContext(ctx context.Context, n int) (int64, error) {
	deleted, err := s.deleteVictims(ctx, `SELECT id, created_at FROM context`, n)
	if err != nil {
		return 0, fmt.Errorf("delete oldest context: %w", err)
	}
	return deleted, nil
}

// DeleteContextOverCap deletes up to n context items that are beyond the
// newest perUser items of their user, oldest first. Like
// DeleteOldestContext, it never deletes an item a concurrent insert or
// store is deduplicating against.
func (s *Store) DeleteContextOverCap(ctx context.Context, perUser, n int) (int64, error) {
	deleted, err := s.deleteVictims(ctx, `
		SELECT id, created_at FROM (
			SELECT id, created_at, row_number() OVER (PARTITION BY user_id ORDER BY created_at DESC, id DESC) AS rn
			FROM context
			WHERE user_id IN (SELECT user_id FROM context GROUP BY user_id HAVING count(*) > $2)
		) ranked WHERE rn > $2`, n, perUser)
	if err != nil {
		return 0, fmt.Errorf("delete context over cap: %w", err)
	}
	return deleted, nil
}

// deleteVictims deletes the n oldest of the context items that candidates
// (a query of id and created_at, taking args from $2) selects, each only if
// its created_at is still the one it was chosen with, and returns how many
// it deleted.
//
// An insert or store of a pair the user already has moves the existing
// item's created_at to the newer time, holding the row's lock until it
// commits. Candidates come from a statement's snapshot, which may predate
// such an update: deleting them by id alone deletes an item just said again.
// So both the choice and the delete lock with SKIP LOCKED (passing over
// items a running insert holds) and compare created_at with the value the
// item was chosen with on the row they lock, which is the newest version of
// a row that changed since the snapshot (READ COMMITTED re-checks it): an
// item whose update committed since is passed over. Such items are simply
// reconsidered next run.
func (s *Store) deleteVictims(ctx context.Context, candidates string, n int, args ...any) (int64, error) {
	ids, ats, err := s.chooseVictims(ctx, candidates, n, args...)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	if hook, ok := ctx.Value(pruneChosenKey{}).(func()); ok {
		hook()
	}
	// The delete's cascade bumps the embedding generation (migrations 021,
	// 054) of each victim's user that has a row, which a writer may hold
	// since an earlier statement and, after it, wait for a victim (an
	// import's clear, a re-extraction restating its pair): deleting first,
	// the prune held the victim and waited for the row, and Postgres failed
	// one of the two (40P01; TestPruneBesideReplaceOffline). So the rows
	// are locked first, in user order as every bump takes them (064),
	// while the prune holds no item, and waited for; then the items,
	// passing over those locked. Passing over the victims of a held row
	// instead (SKIP LOCKED) passed over every victim of a user whose
	// vectors were being saved, for the save's whole transaction: beside
	// a loop of saves, half the prune's calls deleted nothing, and a call
	// deleting nothing ends its run (deadorder3).
	//
	// Only the rows there are then are locked: a user without one (no
	// vector yet) may get one before the delete, from a save that then
	// holds it and waits for a row locked here, and the cascade would
	// take it last, out of user order (40P01;
	// TestPruneBesideFirstVectorsOfAUser). So a victim with a vector of a
	// user whose row was not locked is passed over, until the next run.
	// It is told once the victims are held: no vector is saved for a held
	// item, and the statement after the lock sees those committed before.
	var deleted int64
	err = s.inTx(ctx, func(q *Store) error {
		rows, err := q.db.Query(ctx, `SELECT user_id FROM embedding_generations
			WHERE user_id IN (SELECT user_id FROM context WHERE id = ANY($1))
			ORDER BY user_id FOR NO KEY UPDATE`, ids)
		if err != nil {
			return err
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if users == nil {
			users = []string{} // <> ALL(NULL) would pass every vector
		}
		rows, err = q.db.Query(ctx, `SELECT c.id FROM context c
			JOIN unnest($1::bigint[], $2::timestamptz[]) AS v(id, at) ON c.id = v.id AND c.created_at = v.at
			FOR UPDATE OF c SKIP LOCKED`, ids, ats)
		if err != nil {
			return err
		}
		held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(held) == 0 {
			return err
		}
		// What imports recorded of the pairs deleted (import_sources) goes
		// too, as with a clear (dropImportedPairs): left, a reset kept as
		// imported the pair a turn of the user's stated again after the
		// prune, and the replay's model added its own wording beside it
		// (TestResetDeletesAPairFromATurnAfterTheImportedOneWasCleared/prune).
		// The records are passed over when held (SKIP LOCKED): the prune
		// holds its victims, and a forget holding the user's records waits
		// for them (it deletes them anyway); waiting here closed a cycle.
		return q.db.QueryRow(ctx, `WITH gone AS (
				DELETE FROM context c WHERE c.id = ANY($1)
				AND NOT EXISTS (SELECT FROM context_embeddings e WHERE e.context_id = c.id AND e.user_id <> ALL($2))
				RETURNING c.user_id, c.content_hash
			), records AS (
				SELECT i.ctid FROM import_sources i JOIN gone g
					ON i.user_id = g.user_id AND i.content = 'c:' || encode(g.content_hash, 'hex')
				FOR UPDATE OF i SKIP LOCKED
			), unimported AS (
				DELETE FROM import_sources WHERE ctid IN (SELECT ctid FROM records)
			)
			SELECT count(*) FROM gone`, held, users).Scan(&deleted)
	})
	if err != nil {
		return 0, err
	}
	return deleted, nil
}

// chooseVictims returns the n oldest of the items candidates selects that
// no other transaction holds (SKIP LOCKED), with the created_at each was
// chosen with. The locks that tell are let go before it returns: the
// statement's own on the pool, a savepoint's in a caller's transaction
// (held, they would be held while deleteVictims waits for the users'
// generation rows, which a writer waiting for one of them may hold).
func (s *Store) chooseVictims(ctx context.Context, candidates string, n int, args ...any) (ids []int64, ats []time.Time, err error) {
	db := s.db
	if tx, ok := s.db.(pgx.Tx); ok {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer sp.Rollback(ctx) // releases the choice's locks
		db = sp
	}
	// The lateral lock per candidate walks the candidates in order and stops
	// at n (a join of the two would lock after sorting the whole table).
	rows, err := db.Query(ctx, `
		SELECT v.id, v.created_at FROM (`+candidates+` ORDER BY created_at, id) v
		JOIN LATERAL (SELECT FROM context c WHERE c.id = v.id AND c.created_at = v.created_at FOR UPDATE SKIP LOCKED) l ON true
		ORDER BY v.created_at, v.id LIMIT $1`, append([]any{n}, args...)...)
	if err != nil {
		return nil, nil, err
	}
	var (
		id int64
		at time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
		ids, ats = append(ids, id), append(ats, at)
		return nil
	})
	return ids, ats, err
}

// pruneChosenKey carries a test hook run by deleteVictims between choosing
// the items and deleting them (see export_test.go).
type pruneChosenKey struct{}

// VacuumTurns makes the space of cleared turn text reusable, without
// blocking reads or writes.
//
// VACUUM also gives the empty pages at the end of the table (and of its
// TOAST) back to the system, which is where the newest turns' text lies:
// that space is no longer in the files, so the turn text high water (whose
// excess over the text held is the files' reusable space, MeasureSize) is
// lowered by what the files shrank. Without it, clearing recent text (the
// size limit's) made the turn rows count for nothing until new text passed
// the old high water: a review measured a live size of 453 KB where the
// files held 1.2 MB. The turns high water is lowered in proportion, for
// the same reason: the row versions it counts no longer have that space.
func (s *Store) VacuumTurns(ctx context.Context) error {
	var before, after int64
	if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('turns'::regclass)`).Scan(&before); err != nil {
		return fmt.Errorf("vacuum turns: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) turns`); err != nil {
		return fmt.Errorf("vacuum turns: %w", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('turns'::regclass)`).Scan(&after); err != nil {
		return fmt.Errorf("vacuum turns: %w", err)
	}
	if after < before {
		// Turns written meanwhile only make the shrink look smaller: the
		// high water is lowered by less, never by too much.
		// The row versions the turns high water counts (062) held the
		// space given back too: the files now hold that share fewer.
		if _, err := s.pool.Exec(ctx, `UPDATE prune_state SET turn_text_high_water = greatest(turn_text_high_water - $1, 0),
			turns_high_water = round(turns_high_water * ($3::float8 / $2::float8))::bigint`, before-after, before, after); err != nil {
			return fmt.Errorf("vacuum turns: %w", err)
		}
	}
	return nil
}

// DeleteOtherModelVectors deletes the vectors, of context items and of
// document chunks, made by any model that neither model is nor a worker
// process whose heartbeat is within live uses (RegisterProcess): after a
// model change they serve no query (a query vector is compared only with
// its own model's), yet hold their space until their items are deleted.
// The models of the processes still running are kept, so that during a
// rolling change of model neither side deletes the other's. Each
// transaction deletes at most batch vectors (context items', a page in
// item id order: deleteOtherModelPage) or one collection's (chunks':
// deleteOtherModelChunks), so that none runs long; it returns how
// many of each it deleted. The running processes are read once, at the
// start: a process of another model that starts meanwhile may lose the
// vectors it saves during the deletion (its sweep makes them again).
// Serves of role enrich with embeddings on record their model too
// (worker.Presence).
func (s *Store) DeleteOtherModelVectors(ctx context.Context, model string, live time.Duration, batch int) (items, chunks int64, err error) {
	if model == "" || batch < 1 {
		return 0, 0, fmt.Errorf("delete other models' vectors: model %q, batch %d", model, batch)
	}
	rows, err := s.db.Query(ctx, `SELECT DISTINCT embed_model FROM memoryd_processes
		WHERE embed_model IS NOT NULL AND heartbeat_at > now() - $1::interval`, live)
	if err != nil {
		return 0, 0, fmt.Errorf("delete other models' vectors: %w", err)
	}
	keep, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, 0, fmt.Errorf("delete other models' vectors: %w", err)
	}
	keep = append(keep, model)
	// Paged on the primary key, (item, model): an item may hold vectors
	// of several other models, which a page may split.
	for afterID, afterModel := int64(0), ""; ; {
		n, lastID, lastModel, err := s.deleteOtherModelPage(ctx, keep, afterID, afterModel, batch)
		if err != nil {
			return items, chunks, fmt.Errorf("delete other models' vectors: %w", err)
		}
		items += n
		if lastID == 0 {
			break
		}
		afterID, afterModel = lastID, lastModel
	}
	rows, err = s.db.Query(ctx, `SELECT DISTINCT collection_id FROM chunk_embeddings WHERE model <> ALL($1) ORDER BY 1`, keep)
	if err != nil {
		return items, chunks, fmt.Errorf("delete other models' chunk vectors: %w", err)
	}
	colls, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return items, chunks, fmt.Errorf("delete other models' chunk vectors: %w", err)
	}
	for _, c := range colls {
		n, err := s.deleteOtherModelChunks(ctx, keep, c)
		if err != nil {
			return items, chunks, fmt.Errorf("delete other models' chunk vectors: %w", err)
		}
		chunks += n
	}
	return items, chunks, nil
}

// deleteOtherModelChunks deletes the collection's vectors of models not
// in keep, in one transaction, and returns how many it deleted. It locks
// the collection (KEY SHARE, as a put and a chunk vector save take it)
// and then the documents that hold such vectors (SHARE, in document
// order) first: a document's delete deletes its vectors by its cascade,
// chunk after chunk, and this DELETE in its plan's order (the table's,
// the order they were saved in), so that each held a vector the other
// waited for (40P01; TestDropOfOtherModelsChunkVectorsBesideDocumentDelete).
// A delete of the collection or of documents before a time (which lock
// the collections first, FOR UPDATE) waits for it, or it for them.
func (s *Store) deleteOtherModelChunks(ctx context.Context, keep []string, collectionID int64) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(q *Store) error {
		if ok, err := q.shareCollection(ctx, collectionID); !ok || err != nil {
			return err // or deleted, with its vectors
		}
		if _, err := q.db.Exec(ctx, `SELECT count(*) FROM (SELECT FROM documents d WHERE d.collection_id = $1
			AND EXISTS (SELECT FROM chunk_embeddings e WHERE e.collection_id = d.collection_id AND e.doc_id = d.doc_id AND e.model <> ALL($2))
			ORDER BY d.doc_id FOR SHARE OF d) l`, collectionID, keep); err != nil {
			return err
		}
		tag, err := q.db.Exec(ctx, `DELETE FROM chunk_embeddings WHERE collection_id = $1 AND model <> ALL($2)`, collectionID, keep)
		n = tag.RowsAffected()
		return err
	})
	return n, err
}

// deleteOtherModelPage deletes up to batch vectors of models not in keep
// whose (item, model) is after (afterID, afterModel), in one transaction,
// and returns how many it deleted and the last key of the page (0 when
// the page was empty). It locks the page's items first (KEY SHARE, in id
// order), after resetLock shared, as SaveEmbeddings does: every writer
// that deletes an item's vectors (the cascade of a clear, a forget, a
// reset, a prune) holds its items first, in id order, and deletes the
// vectors in its own order (a clear's cascade in the order it deletes the
// items, the table's), so that, deleting them without the items' locks,
// this and such a writer each held a vector the other waited for
// (TestDropOfOtherModelsBesideClear). A prune passes over the items
// locked here (SKIP LOCKED).
func (s *Store) deleteOtherModelPage(ctx context.Context, keep []string, afterID int64, afterModel string, batch int) (n, lastID int64, lastModel string, err error) {
	err = s.inTx(ctx, func(q *Store) error {
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		rows, err := q.db.Query(ctx, `SELECT context_id, model FROM context_embeddings
			WHERE (context_id, model) > ($2, $3) AND model <> ALL($1) ORDER BY context_id, model LIMIT $4`,
			keep, afterID, afterModel, batch)
		if err != nil {
			return err
		}
		var (
			ids    []int64
			models []string
			id     int64
			model  string
		)
		if _, err := pgx.ForEachRow(rows, []any{&id, &model}, func() error {
			ids, models = append(ids, id), append(models, model)
			return nil
		}); err != nil || len(ids) == 0 {
			return err
		}
		lastID, lastModel = ids[len(ids)-1], models[len(models)-1]
		if err := q.lockItems(ctx, "KEY SHARE", `x.id = ANY($1)`, ids); err != nil {
			return err
		}
		// A vector whose item was deleted meanwhile went with it.
		tag, err := q.db.Exec(ctx, `DELETE FROM context_embeddings e USING unnest($1::bigint[], $2::text[]) AS v(id, model)
			WHERE e.context_id = v.id AND e.model = v.model`, ids, models)
		n = tag.RowsAffected()
		return err
	})
	return n, lastID, lastModel, err
}

// VacuumContext makes the space of deleted context rows reusable. Plain
// VACUUM takes no lock that blocks reads or writes, so enrich goes on.
func (s *Store) VacuumContext(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) context, context_terms, context_embeddings`); err != nil {
		return fmt.Errorf("vacuum context: %w", err)
	}
	return nil
}

// VacuumDocuments makes the space of deleted documents, chunks, terms and
// chunk vectors reusable when their tables hold dead rows (Postgres's
// statistics), and reports whether it ran: the size limit counts those
// tables at their live size (MeasureSize), which holds only if their
// space is reused, also where autovacuum is off. Plain VACUUM blocks no
// read or write.
func (s *Store) VacuumDocuments(ctx context.Context) (bool, error) {
	var dead int64
	if err := s.db.QueryRow(ctx, `SELECT sum(pg_stat_get_dead_tuples(t::regclass))::bigint
		FROM unnest(ARRAY['collections', 'documents', 'doc_chunks', 'chunk_terms', 'chunk_embeddings']) AS t`).Scan(&dead); err != nil {
		return false, fmt.Errorf("vacuum documents: %w", err)
	}
	if dead == 0 {
		return false, nil
	}
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) collections, documents, doc_chunks, chunk_terms, chunk_embeddings`); err != nil {
		return false, fmt.Errorf("vacuum documents: %w", err)
	}
	return true, nil
}

// RecordPrune notes a prune run.
func (s *Store) RecordPrune(ctx context.Context, removed int64) error {
	if _, err := s.db.Exec(ctx, `UPDATE prune_state SET last_run_at = now(), last_removed = $1`, removed); err != nil {
		return fmt.Errorf("record prune: %w", err)
	}
	return nil
}
