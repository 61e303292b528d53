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
		w.CreatedAt = now()
	}
	hash := ContentHash(w.UserID, w.Question, w.Answer)
	// DO UPDATE (not DO NOTHING) so the existing row is locked and returned:
	// see InsertContext for why the lock matters to pruning. xmax = 0 only on
	// a fresh insert.
	err = s.db.QueryRow(ctx, `
		INSERT INTO context AS c (user_id, question, answer, created_at, event_id, conversation_id, content_hash, extractor, model, prompt_version)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (user_id, content_hash) DO UPDATE SET created_at = greatest(c.created_at, excluded.created_at)
		RETURNING id, xmax = 0`,
		w.UserID, w.Question, w.Answer, w.CreatedAt, w.EventID, w.ConversationID, hash, w.Extractor, w.Model, w.PromptVersion,
	).Scan(&id, &inserted)
	if err != nil {
		return 0, false, fmt.Errorf("store context: %w", err)
	}
	return id, inserted, nil
}

// ContextDelete selects a user's context items to delete. Set ID, Question
// or both (an item must then match both), or All alone.
type ContextDelete struct {
	UserID string
	// ID deletes the item with this id, if it is the user's.
	ID int64
	// Question deletes items whose question equals it, compared like
	// ContentHash does: case-insensitive, white space collapsed.
	Question string
	// All deletes every context item of the user.
	All bool
}

// ErrEmptySelection is returned by DeleteContext when the selection names
// nothing, so that a forgotten field cannot wipe a user's memory.
var ErrEmptySelection = errors.New("empty selection: set an id, a question or all")

// DeleteContext deletes the user's context items that d selects and returns
// how many went.
func (s *Store) DeleteContext(ctx context.Context, d ContextDelete) (int64, error) {
	question := normalize(d.Question)
	if d.ID == 0 && question == "" && !d.All {
		return 0, fmt.Errorf("delete context: %w", ErrEmptySelection)
	}
	if question == "" {
		tag, err := s.db.Exec(ctx, `DELETE FROM context WHERE user_id = $1 AND ($2::bigint = 0 OR id = $2)`, d.UserID, d.ID)
		if err != nil {
			return 0, fmt.Errorf("delete context: %w", err)
		}
		return tag.RowsAffected(), nil
	}
	// The question is compared with normalize, the function the content hash
	// uses, so that clear forgets exactly what dedup counts as the same
	// question: Postgres's \s and lower() follow its locale and miss white
	// space such as NBSP. SQL only narrows the candidates to questions with
	// as many non-space characters, which normalize keeps (it maps the others
	// rune for rune).
	rows, err := s.db.Query(ctx, `SELECT id, question FROM context
		WHERE user_id = $1 AND ($2::bigint = 0 OR id = $2)
		  AND char_length(regexp_replace(question, $3, '', 'g')) = $4`,
		d.UserID, d.ID, spaceClass(), utf8.RuneCountInString(strings.ReplaceAll(question, " ", "")))
	if err != nil {
		return 0, fmt.Errorf("delete context: %w", err)
	}
	var ids []int64
	var id int64
	var q string
	_, err = pgx.ForEachRow(rows, []any{&id, &q}, func() error {
		if normalize(q) == question {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("delete context: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := s.db.Exec(ctx, `DELETE FROM context WHERE user_id = $1 AND id = ANY($2)`, d.UserID, ids)
	if err != nil {
		return 0, fmt.Errorf("delete context: %w", err)
	}
	return tag.RowsAffected(), nil
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
