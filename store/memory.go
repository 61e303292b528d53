package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// StoreContext writes one context item directly (a model's store_memory tool
// call). It returns the item's id and whether it was inserted: when the user
// already has the same pair (see ContentHash) it returns the existing item's
// id and false, and the item's created_at moves to the newer time. A zero
// w.CreatedAt means now.
func (s *Store) StoreContext(ctx context.Context, w ContextWrite) (id int64, inserted bool, err error) {
	if w.CreatedAt.IsZero() {
		w.CreatedAt = s.now(ctx)
	}
	if s.hasContextHook() {
		// The hook needs the transaction the item is inserted in.
		err = s.inTx(ctx, func(q *Store) error {
			id, inserted, err = q.storeContext(ctx, w)
			if err == nil && inserted {
				err = q.contextWritten(ctx, []ContextRef{{UserID: w.UserID, ID: id}})
			}
			return err
		})
		if err != nil {
			return 0, false, fmt.Errorf("store context: %w", err)
		}
		return id, inserted, nil
	}
	id, inserted, err = s.storeContext(ctx, w)
	if err != nil {
		return 0, false, fmt.Errorf("store context: %w", err)
	}
	return id, inserted, nil
}

// directWins is the SET of an insert into context (alias c) that met a
// pair the user holds: a direct write of it makes the item the user's own
// (extractor direct, no model), as context.update does, so that a reset
// keeps it, and stamps it written now (inserted_at), so that a forget
// applied again to a restored database does not delete it
// (userWrittenSince); any other write leaves the item's provenance.
const directWins = `extractor = CASE WHEN excluded.extractor = 'direct' THEN 'direct' ELSE c.extractor END,
	model = CASE WHEN excluded.extractor = 'direct' THEN '' ELSE c.model END,
	prompt_version = CASE WHEN excluded.extractor = 'direct' THEN '' ELSE c.prompt_version END,
	inserted_at = CASE WHEN excluded.extractor = 'direct' THEN now() ELSE c.inserted_at END`

// storeContext is StoreContext's statement.
func (s *Store) storeContext(ctx context.Context, w ContextWrite) (id int64, inserted bool, err error) {
	hash := ContentHash(w.UserID, w.Question, w.Answer)
	// DO UPDATE (not DO NOTHING) so the existing row is locked and returned:
	// see InsertContext for why the lock matters to pruning. xmax = 0 only on
	// a fresh insert. A direct write of a pair held from a turn makes the
	// item the user's own (as context.update does): a reset before a replay
	// deleted it, and a replay by another model words the turn otherwise,
	// so the pair the store answered for was lost.
	err = s.db.QueryRow(ctx, `
		INSERT INTO context AS c (user_id, question, answer, created_at, event_id, conversation_id, content_hash, extractor, model, prompt_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (user_id, content_hash) DO UPDATE SET created_at = greatest(c.created_at, excluded.created_at),
			`+directWins+`
		RETURNING id, xmax = 0`,
		w.UserID, w.Question, w.Answer, w.CreatedAt, w.EventID, w.ConversationID, hash, w.Extractor, w.Model, w.PromptVersion,
	).Scan(&id, &inserted)
	return id, inserted, err
}

// ContextDelete selects a user's context items to delete. Set ID, Question
// or both (an item must then match both), or All alone.
type ContextDelete struct {
	UserID string
	// ID deletes the item with this id, if it is the user's.
	ID int64
	// Question deletes items whose question equals it, compared like
	// ContentHash does: case-insensitive, white space collapsed, in
	// Unicode NFKC.
	Question string
	// All deletes every context item of the user.
	All bool
}

// ErrEmptySelection is returned by DeleteContext when the selection names
// nothing, so that a forgotten field cannot wipe a user's memory.
var ErrEmptySelection = errors.New("empty selection: set an id, a question or all")

// DeleteContext deletes the user's context items that d selects and returns
// how many went.
//
// The clear is recorded (context_clears) with its time, or the newest
// deleted item's time when that is later, so that an item it covers and
// whose turn is not later is never inserted afterwards, neither by an
// extraction that was running meanwhile nor by a replay nor an import: for
// All, any item of the user; for a Question, any pair with that question
// (normalised, even when no item matched yet); for an ID, the pair deleted;
// and for both, any item extracted again from a deleted item's turn
// (eventKey: another model's wording of it, in a replay).
// A later turn, or StoreContext, stores the pair again. With a turn stream
// set (SetTurnStream), the clear also records the stream's position, read
// before its transaction, and its own time (own_at, migration 050): an item
// from a turn the stream held then is covered, however late its turn is
// stamped, and an item from a turn published after it is judged by the
// clear's own time, so that a deleted item stamped ahead of the clock (a
// device's clock running fast) does not hold back the turns that follow
// the clear.
//
// Each deleted item is a context.deleted change (see changes.go); a clear
// of All is one context.cleared change instead, when it deleted any. It
// waits for a reset of every user in flight, which waits for it (see
// resetLock).
func (s *Store) DeleteContext(ctx context.Context, d ContextDelete) (int64, error) {
	question := normalize(d.Question)
	if d.ID == 0 && question == "" && !d.All {
		return 0, fmt.Errorf("delete context: %w", ErrEmptySelection)
	}
	// The key of the clear: empty for all, the question's hash when the
	// question alone selects, else (an id) the deleted pairs' own hashes.
	var key []byte
	switch {
	case d.All:
		key = []byte{}
	case d.ID == 0:
		key = questionHash(d.UserID, d.Question)
	}
	pos, err := s.turnStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete context: %w", err)
	}
	var n int64
	err = s.inTx(ctx, func(q *Store) error {
		// First: a reset of every user keeps the cleared turns' other
		// items by the clear recorded here (see resetLock).
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		if err := q.lockClears(ctx, []string{d.UserID}, true); err != nil {
			return err
		}
		// With a question, the candidates are chosen in Go by normalize,
		// the function the content hash uses, so that clear forgets exactly
		// what dedup counts as the same question (Postgres's \s and lower()
		// follow its locale and miss white space such as NBSP); nil ids
		// select by user and id alone.
		var ids []int64
		if question != "" {
			var err error
			if ids, err = q.questionMatches(ctx, d.UserID, d.ID, question); err != nil {
				return err
			}
		}
		// Several items, in id order (see lockItems); one by id needs none.
		if d.ID == 0 {
			if err := q.lockItems(ctx, "UPDATE", `x.user_id = $1 AND ($2::bigint[] IS NULL OR x.id = ANY($2))`, d.UserID, nilIfNone(question, ids)); err != nil {
				return err
			}
		}
		del := func() error {
			return q.db.QueryRow(ctx, `
			WITH gone AS (
				DELETE FROM context
				WHERE user_id = $1
				  AND ($2::bigint = 0 OR id = $2)
				  AND ($3::bigint[] IS NULL OR id = ANY($3))
				RETURNING content_hash, created_at, event_id, said_in
			), clear AS (
				INSERT INTO context_clears AS c (user_id, hash, cleared_at, own_at, stream_seq, stream_stored_at)
				-- own_at: without a position the clear judges every turn by
				-- cleared_at, and keeps doing so merged into a row that has one.
				SELECT $1, k.hash, greatest($5::timestamptz, k.at),
					CASE WHEN $7::timestamptz IS NULL THEN greatest($5::timestamptz, k.at) ELSE $5::timestamptz END,
					$6::bigint, $7::timestamptz
				FROM (SELECT $4::bytea AS hash, (SELECT max(created_at) FROM gone) AS at WHERE $4::bytea IS NOT NULL
				      UNION ALL
				      SELECT content_hash, max(created_at) FROM gone WHERE $4::bytea IS NULL GROUP BY content_hash
				      UNION ALL
				      -- The deleted items' turns, every one that said
				      -- the pair: extracted again (a replay, another
				      -- model's wording), they bring nothing back
				      -- (eventKey). A clear of all needs none. Not the
				      -- user's own recorded turn when an import brought
				      -- the pair under its id: event ids are unique per
				      -- user only, and another user's export may name
				      -- one of this user's turns, which said something
				      -- else (importedOwnTurn).
				      SELECT `+strings.NewReplacer("{user}", "$1::text", "{event}", "ev.e").Replace(eventKeySQL)+`, max(created_at)
				      FROM gone, unnest(array_prepend(event_id, said_in)) AS ev(e)
				      WHERE ev.e <> '' AND NOT $8::bool
				        AND NOT `+strings.NewReplacer("{user}", "$1", "{event}", "ev.e", "{hash}", "gone.content_hash").Replace(importedOwnTurn)+`
				      GROUP BY ev.e) k
				ON CONFLICT (user_id, hash) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at),
					own_at = greatest(c.own_at, excluded.own_at), `+mergeStreamPosition+`
			), unimported AS (
				-- What imports recorded of the pairs (see
				-- dropImportedPairs): read above on the statement's
				-- snapshot, before this delete.
				DELETE FROM import_sources i USING gone
				WHERE i.user_id = $1 AND i.content = 'c:' || encode(gone.content_hash, 'hex')
			)
			SELECT count(*) FROM gone`,
				d.UserID, d.ID, nilIfNone(question, ids), key, q.clearTime(ctx), int64(pos.Seq), pos.storedOrNil(), d.All).Scan(&n)
		}
		if !d.All {
			return del()
		}
		// A clear of all items is one change, not one per item.
		if err := q.quietly(ctx, del); err != nil || n == 0 {
			return err
		}
		return q.recordChange(ctx, changeContextCleared, n, d.UserID)
	})
	if err != nil {
		return 0, fmt.Errorf("delete context: %w", err)
	}
	return n, nil
}

// importedOwnTurn is the condition that an import brought the pair of
// content hash {hash} under the event id {event} of one of user {user}'s
// own recorded turns. A clear of the pair then does not cover that turn
// (its eventKey): event ids are unique per user only, so the import
// (another user's export: a move from another id) may name a turn of this
// user that said something else, whose memory the clear must not drop.
const importedOwnTurn = `(EXISTS (SELECT 1 FROM import_sources i WHERE i.user_id = {user} AND i.event_id = {event}
		AND i.content = 'c:' || encode({hash}, 'hex'))
	AND EXISTS (SELECT 1 FROM turns t WHERE t.user_id = {user} AND t.event_id = {event}))`

// dropImportedPairs deletes what imports recorded (import_sources) of the
// user's pairs of content hashes hashes, which a clear or an update of
// them took away: a reset keeps a context item whose pair an import
// brought whatever its event id (importedContext), and the record
// outliving the item kept, as imported, the pair a turn of the user's
// stated again after the clear, which the replay extracts again, maybe
// worded otherwise by another model
// (TestResetDeletesAPairFromATurnAfterTheImportedOneWasCleared). Under
// resetLock shared and the user's clear lock, as the clear's and the
// update's other writes.
func (s *Store) dropImportedPairs(ctx context.Context, userID string, hashes [][]byte) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM import_sources WHERE user_id = $1
		AND content IN (SELECT 'c:' || encode(h, 'hex') FROM unnest($2::bytea[]) AS h)`, userID, hashes); err != nil {
		return fmt.Errorf("drop imported pairs: %w", err)
	}
	return nil
}

// lockClears takes, in the current transaction, the clear lock of each of
// the users (an advisory lock per user and schema), in a fixed order:
// exclusive for a clear, shared for the writes a clear must not interleave
// with. A write holding it sees every clear committed before it took the
// lock, and a clear waits for the writes in flight to commit, so a clear
// either deletes what a write stored or is seen by it. Take it after the
// turn locks and before any memory row lock, and, in a writer that
// records what a reset keeps (an import, a context clear or update, a
// clear of direct writes), after the reset lock (see resetLock).
func (s *Store) lockClears(ctx context.Context, userIDs []string, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	if _, err := s.db.Exec(ctx, lockClearsSQL(fn), userIDs); err != nil {
		return fmt.Errorf("lock clears: %w", err)
	}
	return nil
}

// lockClearsSQL takes, with the advisory lock function fn, the clear lock
// of each user of $1, in user order.
func lockClearsSQL(fn string) string {
	return `SELECT ` + fn + `(hashtext('memoryd.clear.' || current_schema()), hashtext(u))
		FROM (SELECT DISTINCT u FROM unnest($1::text[]) AS u ORDER BY u) users`
}

// lockItems locks, until the transaction ends, the context items (as x)
// that cond selects (taking args), in id order, with the row lock mode
// (UPDATE, NO KEY UPDATE). Every writer locking several of a user's items
// takes them in this order, the one SaveEmbeddings locks its items in: a
// delete or update of them in the table's order (an edited item's row lies
// after those of later ids) could hold an item the save waited for while
// it waited for one the save held, and Postgres failed one of them
// (40P01), a forget, a clear or a reset answering that it failed
// (TestEmbedSaveBesideForget and its siblings). Run it right before the
// statement that deletes or updates them.
func (s *Store) lockItems(ctx context.Context, mode, cond string, args ...any) error {
	if _, err := s.db.Exec(ctx, `SELECT count(*) FROM (SELECT FROM context x WHERE `+cond+` ORDER BY x.id FOR `+mode+`) l`, args...); err != nil {
		return fmt.Errorf("lock context items: %w", err)
	}
	return nil
}

// deleteClears deletes the records of the users' clears (all users' when
// all), for a forget: they are part of what memoryd keeps about a user.
func (s *Store) deleteClears(ctx context.Context, all bool, userIDs []string) error {
	if !all {
		if err := s.lockClears(ctx, userIDs, true); err != nil {
			return err
		}
	}
	for _, table := range []string{"fact_clears", "fact_direct_clears", "fact_import_clears", "context_clears"} {
		if _, err := s.db.Exec(ctx, `DELETE FROM `+table+` WHERE $1 OR user_id = ANY($2)`, all, userIDs); err != nil {
			return fmt.Errorf("delete %s: %w", table, err)
		}
	}
	return nil
}

// inTx runs fn in s's transaction, or in a new one when s runs on the pool.
func (s *Store) inTx(ctx context.Context, fn func(q *Store) error) error {
	if _, ok := s.db.(pgx.Tx); ok {
		return fn(s)
	}
	return s.InTx(ctx, func(_ pgx.Tx, q *Store) error { return fn(q) })
}

// questionMatches returns the ids of the user's context items (of id, when
// set) whose normalised question is question. SQL only narrows the
// candidates: an ASCII question must have as many non-space characters,
// which normalize keeps for ASCII (it maps them rune for rune); any other
// is read, since NFKC may change its length ("ﬁ" is "fi", a decomposed
// accent two runes where the composed one is one).
func (s *Store) questionMatches(ctx context.Context, userID string, id int64, question string) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT id, question FROM context
		WHERE user_id = $1 AND ($2::bigint = 0 OR id = $2)
		  AND (question !~ '^[\x01-\x7f]*$' OR char_length(regexp_replace(question, $3, '', 'g')) = $4)`,
		userID, id, spaceClass(), utf8.RuneCountInString(strings.ReplaceAll(question, " ", "")))
	if err != nil {
		return nil, err
	}
	ids := []int64{} // not nil: a question that matches nothing deletes nothing
	var (
		rowID int64
		q     string
	)
	_, err = pgx.ForEachRow(rows, []any{&rowID, &q}, func() error {
		if normalize(q) == question {
			ids = append(ids, rowID)
		}
		return nil
	})
	return ids, err
}

// nilIfNone is ids when a question selects, else nil (no id filter).
func nilIfNone(question string, ids []int64) []int64 {
	if question == "" {
		return nil
	}
	return ids
}

// spaceClass is a Postgres regular expression matching one character that
// unicode.IsSpace (and so normalize) counts as white space; built on first
// use.
var spaceClass = sync.OnceValue(func() string {
	var b strings.Builder
	b.WriteByte('[')
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			b.WriteRune(r)
		}
	}
	b.WriteByte(']')
	return b.String()
})
