package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotFound is returned when a requested row does not exist.
var ErrNotFound = errors.New("not found")

func notFound(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Fact is one durable key/value fact about a user, with its provenance:
// SourceAt is when the value was stated (the turn's timestamp, or for a
// direct write the time memoryd received it), EventID and ConversationID the
// turn that stated it ("" for a direct write), UpdatedAt when it was written.
type Fact struct {
	UserID         string
	Key            string
	Value          string
	SourceAt       time.Time
	EventID        string
	ConversationID string
	UpdatedAt      time.Time
}

// FactOp is what a FactWrite does to its key. Every operation is dated by
// the write's SourceAt and resolved by it (the latest wins), never by the
// order writes arrive in, so replays and out-of-order jobs converge.
type FactOp string

const (
	// FactSet states the key's value. On a single-valued key it replaces
	// the value. On a list key (FactWrite.List) the list becomes exactly the
	// values of the key's FactSet writes at this source time: items stated
	// earlier are gone.
	FactSet FactOp = "set"
	// FactAdd adds Value to a list key's items (items are identified by
	// their value in Unicode NFKC, lowercased, white space collapsed).
	FactAdd FactOp = "add"
	// FactRemove removes Value from a list key's items.
	FactRemove FactOp = "remove"
	// FactDelete says the key is no longer true: its value, or every item of
	// a list key, stated no later than SourceAt is gone (Value is ignored).
	// On a single-valued key with a Value it says that value is no longer
	// true: the value, if stated no later than SourceAt, goes with every
	// value before it; another value stays.
	FactDelete FactOp = "delete"
)

// FactWrite is a fact to upsert. SourceAt orders writes: the write with the
// latest SourceAt wins whatever order writes arrive in (ties broken by
// Placed.Seq, the turn published later, then EventID), so replays and
// out-of-order jobs converge on the same facts. A direct write (SetFact)
// wins a tie with an extracted value.
type FactWrite struct {
	UserID   string
	Key      string
	Value    string
	SourceAt time.Time
	EventID  string
	// ConversationID is the conversation of the turn EventID names.
	ConversationID string
	// Op is what the write does; "" means FactSet.
	Op FactOp
	// List says Key is list-valued (events.FactKeyInfo): its value is a
	// set of items, each added and removed on its own. The caller decides
	// it by the key alone, the same for every write of the key. Without it
	// FactAdd is a set and FactRemove a delete of its value.
	List bool
	// Placed is the turn's place in the turn stream, for a write
	// extracted from a turn (zero otherwise): a clear of the key that
	// recorded a later position of that stream covers the write whatever
	// SourceAt says (see StreamPosition).
	Placed StreamPosition
	Provenance
}

// UpsertFacts applies fact writes (extracted facts, see FactOp) in one
// transaction and returns how many facts rows it inserted, changed or
// deleted. The result depends only on the set of writes applied, never on
// their order, within a call or across calls:
//
//   - A single-valued key keeps the value latest by (source time, direct
//     write, stream sequence, event id, value): a later source time wins, a
//     direct write wins a tie, then the turn published later
//     (FactWrite.Placed.Seq; 0, none known, loses), then the larger event
//     id.
//   - A delete at T without a value removes a value (every item of a list key) stated no
//     later than T and is recorded as a clear of the key at T (fact_clears,
//     only ever raised), so that a value stated no later than T arriving
//     afterwards is not written, and a later one is.
//   - A delete at T of value v of a single-valued key (a Value that is not
//     blank) is a tombstone of v (fact_value_clears, by v's identity as a
//     list item's, only ever raised): the key's value, if it is v stated
//     no later than T, is deleted and the key cleared at v's source time
//     (v had superseded every value before it); a set of v stated no later
//     than T is not written and clears the key at its own time instead.
//     Another value stays.
//   - A list key (FactWrite.List) holds items (fact_items), each the last
//     writer of its adds and removes by the same order; a set of the list at
//     T clears the key just before T (listSetGap) and adds each item set at
//     T, so the list becomes exactly the items of the statement. The key's
//     facts row is then materialised: the present items joined by ", ",
//     in alphabetical order of their identities (an order no arrival order
//     or restatement can change, so a repeat changes nothing), with the
//     provenance of the newest; none, no row.
//
// Every change of a facts row is recorded in fact_history by a trigger, with
// the operation (set, add, remove, delete) and its turn.
func (s *Store) UpsertFacts(ctx context.Context, facts []FactWrite) (int, error) {
	return s.upsertFacts(ctx, facts, false)
}

// upsertFacts is UpsertFacts; with held, the transaction holds the reset
// lock and the writes' users' clear locks already (SaveMemory), and they
// are not asked for again: a round trip each.
func (s *Store) upsertFacts(ctx context.Context, facts []FactWrite, held bool) (int, error) {
	writes, err := normaliseWrites(facts)
	if err != nil {
		return 0, fmt.Errorf("upsert facts: %w", err)
	}
	if len(writes) == 0 {
		return 0, nil
	}
	var changed int
	err = s.inTx(ctx, func(q *Store) error {
		// First (an extraction's save holds only the user and turn locks
		// before it): a reset of every user deletes fact_clears, then
		// fact_value_clears, then fact_items and facts, where applyFacts
		// writes fact_value_clears, fact_clears, facts and fact_items in
		// another order, so interleaved with it the two deadlocked (see
		// resetLock).
		if !held {
			if err := q.lockResets(ctx); err != nil {
				return err
			}
		}
		var err error
		changed, err = q.applyFacts(ctx, writes, held)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("upsert facts: %w", err)
	}
	return changed, nil
}

// SetFactValues writes a list key's items directly (facts.set on a list
// key): a statement made now, like SetFact, that the list is exactly values
// (items identified as in fact_items: case and white space do not make two
// items). It is a set of the list at the current time: items stated earlier
// go, an item from a turn stamped later (within the worker's clock skew)
// stays or stays removed, and a direct write wins a tie. It returns the fact
// current after the write and whether every value is an item of it; with no
// item present at all the Fact holds only the user and key. Like DeleteFact,
// it and a reset of every user wait for each other (see resetLock).
func (s *Store) SetFactValues(ctx context.Context, userID, key string, values []string) (Fact, bool, error) {
	writes := make([]FactWrite, 0, len(values))
	at := s.now(ctx)
	for _, v := range values {
		// Stamped in the transaction (directWriteTime).
		writes = append(writes, FactWrite{UserID: userID, Key: key, Value: v, SourceAt: at, Op: FactSet, List: true,
			Provenance: Provenance{Extractor: "direct"}})
	}
	writes, err := normaliseWrites(writes)
	if err != nil || len(writes) == 0 {
		return Fact{}, false, fmt.Errorf("set fact values: no item in %q", values)
	}
	// The first of values with the same identity is the one stated.
	ids := map[string]bool{}
	writes = slices.DeleteFunc(writes, func(w FactWrite) bool {
		id := itemIdentity(w.Value)
		seen := ids[id]
		ids[id] = true
		return seen
	})
	var (
		f      Fact
		stored bool
	)
	err = s.inTx(ctx, func(q *Store) error {
		// First: a reset of every user copies the direct clear of the
		// list this records (see resetLock).
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		// The user's clears next (applyFacts takes the same lock again),
		// so that a facts.clear committing meanwhile is either seen by
		// directWriteTime or waits for this write.
		if err := q.lockClears(ctx, []string{userID}, false); err != nil {
			return err
		}
		at, err := q.directWriteTime(ctx, userID, key)
		if err != nil {
			return err
		}
		for i := range writes {
			writes[i].SourceAt = at
		}
		if _, err := q.applyFacts(ctx, writes, false); err != nil {
			return err
		}
		var n int
		if err := q.db.QueryRow(ctx, `SELECT count(*) FROM fact_items i
			LEFT JOIN fact_clears c ON c.user_id = i.user_id AND c.key = i.key
			WHERE i.user_id = $1 AND i.key = $2 AND i.item = ANY($3) AND i.present AND (c.cleared_at IS NULL OR i.source_at > c.cleared_at)`,
			userID, key, slices.Collect(maps.Keys(ids))).Scan(&n); err != nil {
			return err
		}
		stored = n == len(ids)
		f, err = q.Fact(ctx, userID, key)
		if errors.Is(err, ErrNotFound) {
			f, err = Fact{UserID: userID, Key: key}, nil
		}
		return err
	})
	if err != nil {
		return Fact{}, false, fmt.Errorf("set fact values: %w", err)
	}
	return f, stored, nil
}

// directWriteTime is the time a direct write of key (facts.set) states its
// value: now, or, when the user's own last clear of the key (facts.clear,
// which takes the time of the value it deleted when that is later) is not
// earlier, just after that clear. A value from a turn stamped ahead of the
// clock (within the skew the worker allows) would otherwise have its clear
// refuse every facts.set of the key until the clock passed it, though the
// user set it after clearing it.
func (s *Store) directWriteTime(ctx context.Context, userID, key string) (time.Time, error) {
	at := s.now(ctx)
	var cleared *time.Time
	if err := s.db.QueryRow(ctx, `SELECT max(cleared_at) FROM fact_direct_clears WHERE user_id = $1 AND key = $2`,
		userID, key).Scan(&cleared); err != nil {
		return time.Time{}, err
	}
	if cleared != nil && !cleared.Before(at) {
		at = cleared.Add(time.Microsecond)
	}
	return at, nil
}

// SetFact writes one fact directly (a model's set_fact tool call). It is a
// statement made now: it is stamped with the current time and wins over every
// extracted value whose source time is not later, and over any earlier direct
// write (the last one received wins). A value from a turn stamped later
// (within the clock skew the worker allows) stays current, and so does a
// later turn's delete of the key or of this value: the write is refused.
// SetFact returns the fact current after the write (zero when there is
// none) and whether it is the one written, so that a caller never reports a
// write that did not happen. It takes the locks every fact write takes (the
// user's clears, shared, then the key's), so that it and a concurrent
// extraction's delete of the key end the same in either order.
func (s *Store) SetFact(ctx context.Context, userID, key, value string) (Fact, bool, error) {
	var (
		f      Fact
		stored bool
	)
	err := s.inTx(ctx, func(q *Store) error {
		// First, as UpsertFacts (which a retracted value calls): see
		// resetLock.
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		if err := q.lockClears(ctx, []string{userID}, false); err != nil {
			return err
		}
		if err := q.lockFactKeys(ctx, []userKey{{userID, key}}); err != nil {
			return err
		}
		at, err := q.directWriteTime(ctx, userID, key)
		if err != nil {
			return err
		}
		var retracted bool
		if err := q.db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM fact_value_clears
			WHERE user_id = $1 AND key = $2 AND item = $3 AND cleared_at >= $4)`, userID, key, itemIdentity(value), at).Scan(&retracted); err != nil {
			return err
		}
		if retracted {
			// A turn stamped later said this value is no longer true: the
			// write is refused and, like an extracted value so covered, it
			// still supersedes the older values (UpsertFacts does both).
			if _, err := q.UpsertFacts(ctx, []FactWrite{{UserID: userID, Key: key, Value: value, SourceAt: at, Op: FactSet,
				Provenance: Provenance{Extractor: "direct"}}}); err != nil {
				return err
			}
			var err error
			if f, err = q.Fact(ctx, userID, key); errors.Is(err, ErrNotFound) {
				f, err = Fact{}, nil
			}
			return err
		}
		rows, err := q.db.Query(ctx, `
			INSERT INTO facts AS f (user_id, key, value, source_at, event_id, extractor, updated_at)
			SELECT $1, $2, $3, $4, '', 'direct', clock_timestamp()
			WHERE NOT EXISTS (SELECT FROM fact_clears c WHERE c.user_id = $1 AND c.key = $2 AND c.cleared_at >= $4)
			ON CONFLICT (user_id, key) DO UPDATE
			SET value = excluded.value, source_at = greatest(f.source_at, excluded.source_at), event_id = '', source_seq = 0,
			    conversation_id = '', extractor = 'direct', model = '', prompt_version = '', updated_at = excluded.updated_at
			WHERE f.source_at <= excluded.source_at OR f.extractor = 'direct'
			RETURNING `+factColumns, userID, key, value, at)
		if err != nil {
			return err
		}
		if f, err = pgx.CollectExactlyOneRow(rows, scanFact); err == nil {
			stored = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// A later turn's value or delete wins; the key's lock holds it.
		if f, err = q.Fact(ctx, userID, key); errors.Is(err, ErrNotFound) {
			f, err = Fact{}, nil
		}
		return err
	})
	if err != nil {
		return Fact{}, false, fmt.Errorf("set fact: %w", err)
	}
	return f, stored, nil
}

// Facts returns a user's facts, the latest stated (source_at) first, then
// by key, at most limit (all when limit <= 0).
func (s *Store) Facts(ctx context.Context, userID string, limit int) ([]Fact, error) {
	return s.FactsAfter(ctx, userID, time.Time{}, "", limit)
}

// FactsAfter returns a page of a user's facts in Facts' order: those after
// the fact stated at afterSourceAt under afterKey (from the first when
// afterKey is ""), at most limit (all when limit <= 0).
func (s *Store) FactsAfter(ctx context.Context, userID string, afterSourceAt time.Time, afterKey string, limit int) ([]Fact, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.db.Query(ctx, `SELECT `+factColumns+` FROM facts
		WHERE user_id = $1 AND ($2 = '' OR source_at < $3 OR (source_at = $3 AND key > $2))
		ORDER BY source_at DESC, key LIMIT NULLIF($4, -1)`, userID, afterKey, afterSourceAt, limit)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	facts, err := pgx.CollectRows(rows, scanFact)
	if err != nil {
		return nil, fmt.Errorf("facts: %w", err)
	}
	return facts, nil
}

// factColumns are the columns scanFact reads, in its order.
const factColumns = `user_id, key, value, source_at, event_id, conversation_id, updated_at`

func scanFact(row pgx.CollectableRow) (Fact, error) {
	var f Fact
	err := row.Scan(&f.UserID, &f.Key, &f.Value, &f.SourceAt, &f.EventID, &f.ConversationID, &f.UpdatedAt)
	return f, err
}

// Fact returns one fact, or ErrNotFound.
func (s *Store) Fact(ctx context.Context, userID, key string) (Fact, error) {
	rows, err := s.db.Query(ctx, `SELECT `+factColumns+` FROM facts
		WHERE user_id = $1 AND key = $2`, userID, key)
	if err != nil {
		return Fact{}, fmt.Errorf("fact: %w", err)
	}
	f, err := pgx.CollectExactlyOneRow(rows, scanFact)
	if err != nil {
		return Fact{}, notFound("fact", err)
	}
	return f, nil
}

// DeleteFact clears one fact and returns how many rows went (0 or 1). A
// list key's items go with it.
//
// The clear is recorded (fact_clears) with its time, or the cleared value's
// source time when that is later: an extracted value whose source time is
// not later (for a list key, the newest present item's: a removed item's
// time does not count) is never written afterwards, neither by an extraction that was
// running meanwhile nor by a replay. A later turn, or SetFact, sets the fact
// again. With a turn stream set (SetTurnStream), the clear also records the
// stream's position: a value from a turn the stream held then is not
// written either, however late its turn is stamped. It and a reset of every
// user, which keeps the clear, wait for each other (see resetLock).
func (s *Store) DeleteFact(ctx context.Context, userID, key string) (int64, error) {
	pos, err := s.turnStream(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete fact: %w", err)
	}
	var n int64
	err = s.inTx(ctx, func(q *Store) error {
		// First: a reset of every user copies the direct clear recorded
		// here (see resetLock).
		if err := q.lockResets(ctx); err != nil {
			return err
		}
		if err := q.lockClears(ctx, []string{userID}, true); err != nil {
			return err
		}
		return q.db.QueryRow(ctx, `
			WITH gone AS (
				DELETE FROM facts WHERE user_id = $1 AND key = $2 RETURNING source_at
			), items AS (
				-- A removed item's tombstone is not a value the clear
				-- deletes: its time (a device's clock ahead) must not
				-- push the clear past the adds that follow it.
				DELETE FROM fact_items WHERE user_id = $1 AND key = $2 RETURNING CASE WHEN present THEN source_at END AS source_at
			), at AS (
				SELECT greatest($3, (SELECT max(source_at) FROM gone), (SELECT max(source_at) FROM items)) AS t
			), clear AS (
				INSERT INTO fact_clears AS c (user_id, key, cleared_at, stream_seq, stream_stored_at)
				SELECT $1, $2, t, $4::bigint, $5::timestamptz FROM at
				ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at), `+mergeStreamPosition+`
			), direct AS (
				-- Kept by a reset (ResetMemory), unlike the clears turns made.
				INSERT INTO fact_direct_clears AS c (user_id, key, cleared_at, stream_seq, stream_stored_at)
				SELECT $1, $2, t, $4::bigint, $5::timestamptz FROM at
				ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at), `+mergeStreamPosition+`
			)
			SELECT count(*) FROM gone`, userID, key, q.clearTime(ctx), int64(pos.Seq), pos.storedOrNil()).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("delete fact: %w", err)
	}
	return n, nil
}
