package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// CallID identifies one model call's token usage, so that recording it
// again writes nothing (AddCallUsageOn, AddTurnUsage): a transaction that
// recorded it may have committed though its client saw the connection
// lost during the COMMIT (ErrCommitUnconfirmed), and the caller records it
// again. It is a UUID of version 7, its first 48 bits the time it was made
// in Unix milliseconds, so that the ids recorded are deleted by age along
// their key (DeleteUsageCallsBefore). The zero CallID is none: usage with
// it is always added.
type CallID [16]byte

// NewCallID returns a new CallID made at at (Postgres's clock, Clock.Now,
// as DeleteUsageCallsBefore is given).
func NewCallID(at time.Time) CallID {
	var id CallID
	_, _ = rand.Read(id[6:]) // crypto/rand.Read does not fail
	id.setTime(at)
	id[6] = 0x70 | id[6]&0x0f // version 7
	id[8] = 0x80 | id[8]&0x3f // RFC 9562 variant
	return id
}

func (c *CallID) setTime(at time.Time) {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(max(at.UnixMilli(), 0)))
	copy(c[:6], ms[2:])
}

// Time returns when c was made, to the millisecond.
func (c CallID) Time() time.Time {
	var ms [8]byte
	copy(ms[2:], c[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:])))
}

// IsZero reports whether c is none.
func (c CallID) IsZero() bool { return c == CallID{} }

// uuid is c as a parameter: NULL for none.
func (c CallID) uuid() pgtype.UUID { return pgtype.UUID{Bytes: c, Valid: !c.IsZero()} }

// UsageCall is one model call's tokens spent on a user's turns.
type UsageCall struct {
	// ID is the call's; zero for none (added whether or not it was
	// before).
	ID     CallID
	UserID string
	Used   TokenUsage
	// Forgotten is set for a call on turns a forget covers (one in
	// flight while its user was forgotten): its tokens count in
	// everyone's count of the day alone, which names no user (a forget
	// keeps the user's share of it), and in none of the user's. UserID
	// then only picks the shard of everyone's count (addDailyUsage), and
	// is stored nowhere.
	Forgotten bool
}

// AddCallUsageOn adds the tokens of model calls (of model) to their
// users' usage, counted towards the spend of day (see SpendOn), but for
// the calls whose ID was recorded before: each call's usage is added
// once, in the transaction that records its ID. A Forgotten call's tokens
// go to everyone's count of day alone. Run it inside InTx, after
// LockUsers has said no forget covers the turns the tokens were spent on
// (AddTurnUsage does both in a transaction of its own).
func (s *Store) AddCallUsageOn(ctx context.Context, day time.Time, model string, calls []UsageCall) error {
	return s.addUsages(ctx, day, model, calls)
}

// UsageCallsKept is how long the ids of calls whose usage was recorded
// are kept (DeleteUsageCallsBefore's caller): a call recorded again within
// it adds nothing.
const UsageCallsKept = 24 * time.Hour

// usageCallsBatch bounds the ids one DeleteUsageCallsBefore deletes.
const usageCallsBatch = 10_000

// DeleteUsageCallsBefore deletes the ids of calls made before t (by their
// CallID's time), at most usageCallsBatch of them, oldest first: a call
// whose usage is recorded again after its id is deleted is counted again.
// It returns how many it deleted.
func (s *Store) DeleteUsageCallsBefore(ctx context.Context, t time.Time) (int64, error) {
	var bound CallID
	bound.setTime(t)
	tag, err := s.db.Exec(ctx, `DELETE FROM llm_usage_calls WHERE call_id IN (
		SELECT call_id FROM llm_usage_calls WHERE call_id < $1 ORDER BY call_id LIMIT $2)`, pgtype.UUID{Bytes: bound, Valid: true}, usageCallsBatch)
	if err != nil {
		return 0, fmt.Errorf("delete old usage call ids: %w", err)
	}
	return tag.RowsAffected(), nil
}

// addUsages adds the tokens of model calls, by user, but for those whose
// ID was recorded before (recording the others'): each user's total of
// the model, in user order, then the day's counts (addDailyUsage); a
// Forgotten call's to everyone's count of the day alone. The ids are
// recorded in the statement that adds the totals, so that a save runs as
// many statements as before they were.
func (s *Store) addUsages(ctx context.Context, day time.Time, model string, calls []UsageCall) error {
	if len(calls) == 0 {
		return nil
	}
	ids := make([]pgtype.UUID, 0, len(calls))
	users := make([]string, 0, len(calls))
	prompt, completion, extractions := make([]int64, 0, len(calls)), make([]int64, 0, len(calls)), make([]int64, 0, len(calls))
	forgotten := make([]bool, 0, len(calls))
	seen := make(map[CallID]bool, len(calls))
	for _, c := range calls {
		if !c.ID.IsZero() {
			if seen[c.ID] {
				continue // one call, given twice: counted once
			}
			seen[c.ID] = true
		}
		ids, users = append(ids, c.ID.uuid()), append(users, c.UserID)
		prompt, completion, extractions = append(prompt, c.Used.PromptTokens), append(completion, c.Used.CompletionTokens), append(extractions, c.Used.Extractions)
		forgotten = append(forgotten, c.Forgotten)
	}
	// The ids first, in key order; then the users' totals of the calls
	// not recorded before, in user order (an unreferenced data-modifying
	// WITH runs to completion after the query), but for forgotten users';
	// the query returns what was added, for the day's counts.
	rows, err := s.db.Query(ctx, `
		WITH c AS (
			SELECT * FROM unnest($1::uuid[], $2::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bool[]) AS c(id, u, p, cp, e, f)
		), recorded AS (
			INSERT INTO llm_usage_calls (call_id) SELECT id FROM c WHERE id IS NOT NULL ORDER BY id
			ON CONFLICT (call_id) DO NOTHING
			RETURNING call_id
		), w AS (
			SELECT c.u, c.f, sum(c.p)::bigint AS p, sum(c.cp)::bigint AS cp, sum(c.e)::bigint AS e FROM c
			WHERE c.id IS NULL OR c.id IN (SELECT call_id FROM recorded)
			GROUP BY c.u, c.f
		), added AS (
			INSERT INTO llm_usage (user_id, model, prompt_tokens, completion_tokens, extractions)
			SELECT w.u, $3, w.p, w.cp, w.e FROM w WHERE NOT w.f ORDER BY w.u
			ON CONFLICT (user_id, model) DO UPDATE SET
				prompt_tokens = llm_usage.prompt_tokens + excluded.prompt_tokens,
				completion_tokens = llm_usage.completion_tokens + excluded.completion_tokens,
				extractions = llm_usage.extractions + excluded.extractions
		)
		SELECT w.u, w.f, w.p + w.cp FROM w ORDER BY w.u, w.f`,
		ids, users, model, prompt, completion, extractions, forgotten)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	var (
		added  []string
		tokens []int64
		gone   []bool
		u      string
		f      bool
		n      int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&u, &f, &n}, func() error {
		added, gone, tokens = append(added, u), append(gone, f), append(tokens, n)
		return nil
	}); err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	if len(added) == 0 {
		return nil // every call recorded before
	}
	return s.addDailyUsage(ctx, day, added, tokens, gone)
}
