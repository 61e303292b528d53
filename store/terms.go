package store

import (
	"context"
	"errors"
	"fmt"
)

// readStoredCounts parses a candidate's stored term counts as recallSQL
// aggregates them from context_terms: space-separated triples "term
// question answer", term the lexeme's 1-based index in the query's terms,
// into counts (one per term, zero for the terms the item does not hold).
func readStoredCounts(v []byte, counts []TermCount) error {
	clear(counts)
	var triple [3]int
	k := 0
	for i := 0; i < len(v); {
		if v[i] == ' ' {
			i++
			continue
		}
		n, start := 0, i
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			if n > 1<<20 {
				return errors.New("stored counts: number out of range")
			}
			n = n*10 + int(v[i]-'0')
		}
		if i == start || (i < len(v) && v[i] != ' ') {
			return fmt.Errorf("stored counts: want a number at %d", start)
		}
		triple[k] = n
		if k++; k < 3 {
			continue
		}
		k = 0
		t := triple[0] - 1
		if t < 0 || t >= len(counts) {
			return fmt.Errorf("stored counts: term %d of %d", triple[0], len(counts))
		}
		counts[t] = TermCount{Present: true, Question: triple[1], Answer: triple[2]}
	}
	if k != 0 {
		return errors.New("stored counts: incomplete triple")
	}
	return nil
}

// contextTextsSQL reads the texts of some of a user's items by id.
const contextTextsSQL = `SELECT id, question, answer, event_id, conversation_id FROM context WHERE user_id = $1 AND id = ANY($2::bigint[])`

// ContextTexts returns items (the user's, as ranked from a recall's
// candidates, which carry no texts) with their question, answer, event id
// and conversation id read, in the same order; an item no longer there
// (deleted since the recall) is left out. It is the second read of a
// recall: ranking first, then the texts of the few items kept, costs less
// than shipping every candidate's text. Its snapshot is later than the
// recall's, so an item edited in between (context.update) comes with its
// new text; facts and items still come from the recall's one snapshot.
// Items that already have a question (Latest candidates) are read again
// all the same.
func (s *Store) ContextTexts(ctx context.Context, userID string, items []ContextItem) ([]ContextItem, error) {
	if len(items) == 0 {
		return items, nil
	}
	ids := make([]int64, len(items))
	at := make(map[int64]int, len(items))
	for i, it := range items {
		ids[i] = it.ID
		at[it.ID] = i
	}
	rows, err := s.db.Query(ctx, contextTextsSQL, userID, ids)
	if err != nil {
		return nil, fmt.Errorf("context texts: %w", err)
	}
	defer rows.Close()
	found := make([]bool, len(items))
	var (
		id int64
		t  [4]string
	)
	for rows.Next() {
		if err := rows.Scan(&id, &t[0], &t[1], &t[2], &t[3]); err != nil {
			return nil, fmt.Errorf("context texts: %w", err)
		}
		i, ok := at[id]
		if !ok {
			continue
		}
		it := &items[i]
		it.UserID, it.Question, it.Answer, it.EventID, it.ConversationID = userID, t[0], t[1], t[2], t[3]
		found[i] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("context texts: %w", err)
	}
	kept := items[:0]
	for i, it := range items {
		if found[i] {
			kept = append(kept, it)
		}
	}
	return kept, nil
}
