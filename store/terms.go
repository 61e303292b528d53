package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// readStoredCounts reads a candidate's stored term counts as recallSQL
// aggregates them from context_terms: an int8[] with one element per lexeme
// the item holds, term<<32 | question<<16 | answer (term the lexeme's
// 1-based index in the query's terms; the counts are smallints, at most 256
// positions a lexeme), into counts (one per term, zero for the terms the item
// does not hold). v is the array in Postgres' binary format, as pgx asks for
// an int8[] column, or in its text form ({1,2,3}), so that either reads.
func readStoredCounts(v []byte, counts []TermCount) error {
	clear(counts)
	set := func(x int64) error {
		t, q, a := x>>32, (x>>16)&0xffff, x&0xffff
		if x < 0 || t < 1 || t > int64(len(counts)) {
			return fmt.Errorf("stored counts: term %d of %d", t, len(counts))
		}
		counts[t-1] = TermCount{Present: true, Question: int32(q), Answer: int32(a)}
		return nil
	}
	if len(v) > 0 && v[0] == '{' {
		return readCountsText(v, set)
	}
	// Binary: ndim, has nulls, element oid, then per dimension its length
	// and lower bound, then each element's length (-1: NULL) and bytes.
	if len(v) < 12 {
		return errors.New("stored counts: short array header")
	}
	ndim := binary.BigEndian.Uint32(v)
	if ndim == 0 {
		return nil
	}
	if ndim != 1 || len(v) < 20 {
		return fmt.Errorf("stored counts: %d dimensions", ndim)
	}
	n := int(binary.BigEndian.Uint32(v[12:]))
	v = v[20:]
	if n < 0 || len(v) != n*12 {
		return fmt.Errorf("stored counts: %d bytes for %d elements", len(v), n)
	}
	for i := range n {
		e := v[i*12:]
		if int32(binary.BigEndian.Uint32(e)) != 8 {
			return errors.New("stored counts: an element is not 8 bytes")
		}
		if err := set(int64(binary.BigEndian.Uint64(e[4:]))); err != nil {
			return err
		}
	}
	return nil
}

// readCountsText reads the text form of an int8[] of packed counts.
func readCountsText(v []byte, set func(int64) error) error {
	if len(v) < 2 || v[len(v)-1] != '}' {
		return errors.New("stored counts: not an array")
	}
	v = v[1 : len(v)-1]
	for len(v) > 0 {
		i := bytes.IndexByte(v, ',')
		if i < 0 {
			i = len(v)
		}
		x, err := strconv.ParseInt(string(v[:i]), 10, 64)
		if err != nil {
			return fmt.Errorf("stored counts: %w", err)
		}
		if err := set(x); err != nil {
			return err
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
		if len(v) == 0 {
			return errors.New("stored counts: trailing comma")
		}
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
