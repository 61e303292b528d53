package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Operations a fact history entry records (fact_history.op).
const (
	// FactOpSet is a value written: the fact's first value, or a new value
	// replacing another.
	FactOpSet = "set"
	// FactOpClear is the fact deleted: facts.clear, a replay's reset of
	// extracted memory.
	FactOpClear = "clear"
	// FactOpAdd is an item added to a list key (or the list's first item).
	FactOpAdd = "add"
	// FactOpRemove is an item removed from a list key; the fact is deleted
	// when its last item goes.
	FactOpRemove = "remove"
	// FactOpDelete is the fact deleted, or a list key emptied, by a turn
	// that said it is no longer true.
	FactOpDelete = "delete"
)

// The op of a list key's entry describes the change of its value: a set of
// the list is a set; else items only added an add, only removed a remove.
// The entry's EventID, ConversationID and SourceAt are those of the write
// that caused it (for a delete or remove, the turn that said so), not those
// of the value's newest item (the fact's own provenance).

// FactChange is one entry of a fact's history, written by a trigger on every
// change of a fact's value. A nil OldValue is the fact's first value; a nil
// NewValue a deletion (Op FactOpClear, FactOpDelete or FactOpRemove).
// EventID, ConversationID and SourceAt are the source of the operation: the
// turn that stated the new value, or said add, remove or delete, and when
// ("" and nil for a direct write's turn; "" and nil for a clear, whose time
// is ChangedAt); ChangedAt is when the change was written.
type FactChange struct {
	ID             int64
	Key            string
	Op             string
	OldValue       *string
	NewValue       *string
	EventID        string
	ConversationID string
	SourceAt       *time.Time
	ChangedAt      time.Time
}

// historyColumns are the columns scanChange reads, in its order.
const historyColumns = `id, key, op, old_value, new_value, event_id, conversation_id, source_at, changed_at`

func scanChange(row pgx.CollectableRow) (FactChange, error) {
	var c FactChange
	err := row.Scan(&c.ID, &c.Key, &c.Op, &c.OldValue, &c.NewValue, &c.EventID, &c.ConversationID, &c.SourceAt, &c.ChangedAt)
	return c, err
}

// FactHistory returns every change of a user's facts, oldest first.
func (s *Store) FactHistory(ctx context.Context, userID string) ([]FactChange, error) {
	rows, err := s.db.Query(ctx, `SELECT `+historyColumns+` FROM fact_history
		WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("fact history: %w", err)
	}
	changes, err := pgx.CollectRows(rows, scanChange)
	if err != nil {
		return nil, fmt.Errorf("fact history: %w", err)
	}
	return changes, nil
}

// KeyHistoryQuery selects a page of one fact's history.
type KeyHistoryQuery struct {
	UserID, Key string
	// Before, when above 0, continues a listing: only changes recorded
	// before the change with this ID are returned.
	Before int64
	// Limit caps the changes returned; at least 1.
	Limit int
}

// KeyHistory returns one fact's changes, newest first (in the order they
// were recorded), at most q.Limit, and the Before of the next page: 0 when
// there are no older changes. Paging by ID is stable under concurrent
// writes: a change recorded meanwhile is newer than the page and never
// shifts the pages after it.
func (s *Store) KeyHistory(ctx context.Context, q KeyHistoryQuery) ([]FactChange, int64, error) {
	if q.Limit < 1 {
		return nil, 0, fmt.Errorf("key history: limit %d is under 1", q.Limit)
	}
	// One more than asked tells whether another page exists.
	rows, err := s.db.Query(ctx, `SELECT `+historyColumns+` FROM fact_history
		WHERE user_id = $1 AND key = $2 AND ($3::bigint <= 0 OR id < $3::bigint)
		ORDER BY id DESC LIMIT $4`, q.UserID, q.Key, q.Before, q.Limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("key history: %w", err)
	}
	changes, err := pgx.CollectRows(rows, scanChange)
	if err != nil {
		return nil, 0, fmt.Errorf("key history: %w", err)
	}
	var next int64
	if len(changes) > q.Limit {
		changes = changes[:q.Limit]
		next = changes[len(changes)-1].ID
	}
	return changes, next, nil
}
