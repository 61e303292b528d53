package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Managing one user's context items by id: list without a keyword, get,
// update. Deleting by id is DeleteContext with an ID. Every statement here
// filters by user id as well as item id, so another user's id is simply not
// found and is never read or changed.

// ContextCursor is a position in a user's context items, newest first: the
// (created_at, id) of the last item a page returned. The zero cursor is the
// start.
type ContextCursor struct {
	CreatedAt time.Time
	ID        int64
}

// IsZero reports whether c is the start of the list.
func (c ContextCursor) IsZero() bool { return c.ID == 0 && c.CreatedAt.IsZero() }

// ListContext returns at most limit of the user's context items that come
// after cursor in the order newest first (created_at, then id, descending).
// Paging by the last item's (created_at, id) rather than by offset keeps a
// walk stable while items are inserted: each item present for the whole walk
// is returned exactly once, whatever is inserted meanwhile. The exception is
// an item said again during the walk: dedup moves its created_at forward, so
// it may be missed by a walk already past its new position (a new walk
// lists it first).
func (s *Store) ListContext(ctx context.Context, userID string, after ContextCursor, limit int) ([]ContextItem, error) {
	return s.ListScopedContext(ctx, userID, "", after, limit)
}

// ListScopedContext is ListContext over the user's items of one scope
// (migration 018); scope "" lists all the user's items, whatever their
// scope.
func (s *Store) ListScopedContext(ctx context.Context, userID, scope string, after ContextCursor, limit int) ([]ContextItem, error) {
	// One statement per case, so that each is one index range scan (the
	// scoped ones on context_user_scope_idx).
	where, args := `user_id = $1`, []any{userID}
	if scope != "" {
		where, args = `user_id = $1 AND scope = $2`, append(args, scope)
	}
	if !after.IsZero() {
		n := len(args)
		where += fmt.Sprintf(` AND (created_at, id) < ($%d, $%d)`, n+1, n+2)
		args = append(args, after.CreatedAt, after.ID)
	}
	rows, err := s.db.Query(ctx, `SELECT `+contextColumns+` FROM context
		WHERE `+where+` ORDER BY created_at DESC, id DESC LIMIT `+fmt.Sprintf("$%d", len(args)+1), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list context: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanContext)
	if err != nil {
		return nil, fmt.Errorf("list context: %w", err)
	}
	return items, nil
}

// ContextByID returns the user's context item id, or ErrNotFound when the
// user has no item with that id (another user's item included).
func (s *Store) ContextByID(ctx context.Context, userID string, id int64) (ContextItem, error) {
	rows, err := s.db.Query(ctx, `SELECT `+contextColumns+` FROM context WHERE user_id = $1 AND id = $2`, userID, id)
	if err != nil {
		return ContextItem{}, fmt.Errorf("context item: %w", err)
	}
	it, err := pgx.CollectExactlyOneRow(rows, scanContext)
	if errors.Is(err, pgx.ErrNoRows) {
		return ContextItem{}, fmt.Errorf("context item %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return ContextItem{}, fmt.Errorf("context item: %w", err)
	}
	return it, nil
}

// ContextUpdate changes one context item's text. A nil field is left as it
// is.
type ContextUpdate struct {
	UserID   string
	ID       int64
	Question *string
	Answer   *string
	// Check, when set, judges the item's new pair (the part not updated
	// kept) before anything is written: its error is UpdateContext's.
	Check func(question, answer string) error
}

// DuplicateError is returned (wrapped) by UpdateContext when the new text
// equals, as dedup compares pairs (ContentHash), another item the user
// already has. Nothing is changed; the caller may delete one of the two.
type DuplicateError struct {
	// ID is the item that already holds the pair.
	ID int64
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("context item %d already holds this question and answer", e.ID)
}

// UpdateContext replaces the question and/or answer of the user's item u.ID
// and returns the item as updated. It keeps the item's id, time and source
// (event and conversation): it is the same memory, corrected. The content
// hash is recomputed, so dedup compares against the new text, and the search
// vector and lengths are generated columns that follow the text. A new
// text is the user's own write (extractor "direct", no model): a reset
// before a replay keeps it as it keeps the memory tools' other writes,
// since the replay cannot bring the correction back (it extracts the old
// pair, which the update cleared).
//
// The replaced pair is cleared as DeleteContext clears a pair deleted by id,
// its turn included: a replay of the turn it came from does not bring the
// old text back beside the correction, however another model words it. An update to a pair the user already holds in another item
// fails with a *DuplicateError and changes nothing; an update to the item's
// own pair (a change of case or spacing only) just rewrites its text. A
// missing item (or another user's) is ErrNotFound. Like DeleteContext, it
// and a reset of every user wait for each other (see resetLock).
func (s *Store) UpdateContext(ctx context.Context, u ContextUpdate) (ContextItem, error) {
	pos, err := s.turnStream(ctx)
	if err != nil {
		return ContextItem{}, fmt.Errorf("update context: %w", err)
	}
	var out ContextItem
	err = s.inTx(ctx, func(q *Store) error {
		// First, like DeleteContext: a reset of every user keeps the old
		// pair's turn's other items by the clear recorded below.
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		// Exclusive, like a clear: an extraction inserting the old pair
		// either committed before (and its row is the one updated) or sees
		// the clear recorded below.
		if err := q.lockClears(ctx, []string{u.UserID}, true); err != nil {
			return err
		}
		var (
			cur     ContextItem
			oldHash []byte
			saidIn  []string
		)
		err := q.db.QueryRow(ctx, `SELECT `+contextColumns+`, content_hash, said_in FROM context
			WHERE user_id = $1 AND id = $2 FOR UPDATE`, u.UserID, u.ID).
			Scan(&cur.ID, &cur.UserID, &cur.Question, &cur.Answer, &cur.CreatedAt, &cur.EventID, &cur.ConversationID, &oldHash, &saidIn)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("context item %d: %w", u.ID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if u.Question != nil {
			cur.Question = *u.Question
		}
		if u.Answer != nil {
			cur.Answer = *u.Answer
		}
		if u.Check != nil {
			if err := u.Check(cur.Question, cur.Answer); err != nil {
				return err
			}
		}
		hash := ContentHash(u.UserID, cur.Question, cur.Answer)
		var other int64
		err = q.db.QueryRow(ctx, `SELECT id FROM context WHERE user_id = $1 AND content_hash = $2 AND id <> $3`,
			u.UserID, hash, u.ID).Scan(&other)
		switch {
		case err == nil:
			return &DuplicateError{ID: other}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		// In a savepoint: a store of the same pair committing after the
		// look above (a store takes no clear lock) fails the update on the
		// unique index, which is the duplicate the look would have found
		// (TestUpdateToAPairStoredMeanwhileIsADuplicate); it was a 500.
		sp, err := q.db.(pgx.Tx).Begin(ctx)
		if err != nil {
			return err
		}
		// inserted_at: written now, by the user (see userWrittenSince).
		if _, err := sp.Exec(ctx, `UPDATE context SET question = $3, answer = $4, content_hash = $5, inserted_at = now(),
				extractor = CASE WHEN content_hash = $5 THEN extractor ELSE 'direct' END,
				model = CASE WHEN content_hash = $5 THEN model ELSE '' END,
				prompt_version = CASE WHEN content_hash = $5 THEN prompt_version ELSE '' END
			WHERE user_id = $1 AND id = $2`, u.UserID, u.ID, cur.Question, cur.Answer, hash); err != nil {
			_ = sp.Rollback(ctx)
			if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "23505" {
				return err
			}
			if err := q.db.QueryRow(ctx, `SELECT id FROM context WHERE user_id = $1 AND content_hash = $2 AND id <> $3`,
				u.UserID, hash, u.ID).Scan(&other); err != nil {
				return fmt.Errorf("duplicate pair: %w", err)
			}
			return &DuplicateError{ID: other}
		}
		if err := sp.Commit(ctx); err != nil {
			return err
		}
		if string(hash) != string(oldHash) {
			// The old pair and, as a clear by id, its turns (eventKey):
			// a replay by another model words the old text otherwise.
			// Not the user's own turn an import brought the pair under
			// the id of (another user's export may name it: see
			// importedOwnTurn).
			imported, err := q.importedEvents(ctx, u.UserID, oldHash, append([]string{cur.EventID}, saidIn...))
			if err != nil {
				return err
			}
			keys := [][]byte{oldHash}
			for _, e := range append([]string{cur.EventID}, saidIn...) {
				if k := eventKey(u.UserID, e); k != nil && !imported[e] {
					keys = append(keys, k)
				}
			}
			if _, err := q.db.Exec(ctx, `INSERT INTO context_clears AS c (user_id, hash, cleared_at, own_at, stream_seq, stream_stored_at)
				SELECT $1, k, greatest($3::timestamptz, $4), CASE WHEN $6::timestamptz IS NULL THEN greatest($3::timestamptz, $4) ELSE $3::timestamptz END, $5, $6
				FROM unnest($2::bytea[]) AS k
				ON CONFLICT (user_id, hash) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at),
					own_at = greatest(c.own_at, excluded.own_at), `+mergeStreamPosition,
				u.UserID, keys, q.clearTime(ctx), cur.CreatedAt, int64(pos.Seq), pos.storedOrNil()); err != nil {
				return err
			}
			if err := q.dropImportedPairs(ctx, u.UserID, [][]byte{oldHash}); err != nil {
				return err
			}
			// New text: its vector is stale (readers skip it) until the
			// item is embedded again.
			if err := q.contextWritten(ctx, []ContextRef{{UserID: u.UserID, ID: u.ID}}); err != nil {
				return err
			}
		}
		out = cur
		return nil
	})
	if err != nil {
		return ContextItem{}, fmt.Errorf("update context: %w", err)
	}
	return out, nil
}

// importedEvents returns which of events are the user's own recorded turns
// under whose ids an import brought the pair of content hash hash
// (importedOwnTurn).
func (s *Store) importedEvents(ctx context.Context, userID string, hash []byte, events []string) (map[string]bool, error) {
	rows, err := s.db.Query(ctx, `SELECT e FROM unnest($2::text[]) AS ev(e)
		WHERE `+strings.NewReplacer("{user}", "$1::text", "{event}", "ev.e", "{hash}", "$3::bytea").Replace(importedOwnTurn), userID, events, hash)
	if err != nil {
		return nil, fmt.Errorf("imported events: %w", err)
	}
	out := map[string]bool{}
	var e string
	if _, err := pgx.ForEachRow(rows, []any{&e}, func() error {
		out[e] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("imported events: %w", err)
	}
	return out, nil
}
