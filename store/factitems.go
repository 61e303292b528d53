package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// List keys (FactWrite.List) hold a set of items in fact_items, one row per
// item identity (itemIdentity) with the item's latest operation: an add
// makes it present, a remove leaves a tombstone. Operations are ordered by
// the total order (source time, direct write, stream sequence, event id,
// add over remove, value), the last one wins, so any arrival order
// converges. A clear of the
// key (fact_clears: a delete, a set, facts.clear) hides every item stated no
// later than it; such rows are deleted, being dominated by the clear. The
// key's facts row is materialised from the present items after every
// change (materialise), so that every read path reads facts alone.

// listSetGap is how long before its source time a set of a list key clears
// the key: a set at T is a clear at T-listSetGap plus an add of each item
// at T, so every item set by the same statement stays and every item stated
// before it goes. It is Postgres's timestamp resolution.
const listSetGap = time.Microsecond

// itemIdentity is a list item's identity: its value in Unicode NFKC,
// lowercased, white space collapsed and trimmed (normalize, as a context
// item's pair is compared). "Peanuts", " peanuts " and "ｐｅａｎｕｔｓ" are the
// same item. Before migration 051 it was without NFKC (legacyNormalize).
func itemIdentity(v string) string {
	return normalize(v)
}

// userKey names one fact of one user.
type userKey struct{ user, key string }

func compareUserKeys(a, b userKey) int {
	if c := strings.Compare(a.user, b.user); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// normaliseWrites checks the ops and gives every write the form the store
// applies: Op "" is FactSet; on a single-valued key an add is a set and a
// remove a delete of that value; source times are cut to Postgres's
// microseconds (as pgx sends them) so that Go and SQL compare the same
// times; a list item's value is trimmed, and an item with no content is
// dropped.
func normaliseWrites(facts []FactWrite) ([]FactWrite, error) {
	out := make([]FactWrite, 0, len(facts))
	for _, f := range facts {
		f.SourceAt = f.SourceAt.Truncate(time.Microsecond)
		switch f.Op {
		case "", FactSet:
			f.Op = FactSet
		case FactAdd:
			if !f.List {
				f.Op = FactSet
			}
		case FactRemove:
			if !f.List {
				f.Op = FactDelete
			}
		case FactDelete:
		default:
			return nil, fmt.Errorf("unknown operation %q on key %q", f.Op, f.Key)
		}
		if f.List && f.Op != FactDelete {
			f.Value = strings.TrimSpace(f.Value)
			if itemIdentity(f.Value) == "" {
				continue
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// applyFacts applies normalised writes in the current transaction and
// returns how many facts rows it inserted, changed or deleted. The steps
// are ordered so that the result is the one any order of the writes gives:
// the call's value tombstones are recorded first, then the sets they cover
// become clears of their keys, every clear of the call is recorded, and
// only then are values and items stated no later than a clear skipped.
// With clearsHeld the transaction holds the writes' users' clear locks
// already.
func (s *Store) applyFacts(ctx context.Context, writes []FactWrite, clearsHeld bool) (int, error) {
	users := make([]string, len(writes))
	for i, w := range writes {
		users[i] = w.UserID
	}
	// Held to the end of the transaction: a clear of these users waits
	// for it, and it sees every clear committed before.
	if !clearsHeld {
		if err := s.lockClears(ctx, users, false); err != nil {
			return 0, err
		}
	}
	writes, err := s.dropPlacedBeforeClears(ctx, writes)
	if err != nil || len(writes) == 0 {
		return 0, err
	}
	var (
		singles []FactWrite
		items   []FactWrite
		clears  = map[userKey]time.Time{}
		deletes = map[userKey]FactWrite{}  // the latest clear of each single-valued key, as the write that caused it
		values  = map[valueKey]FactWrite{} // the latest value delete of each value of a single-valued key
		causes  = map[userKey][]FactWrite{}
		direct  = map[userKey]time.Time{} // the clears of direct writes: a reset keeps them
	)
	clearAt := func(k userKey, at time.Time) {
		if old, ok := clears[k]; !ok || at.After(old) {
			clears[k] = at
		}
	}
	clearSingle := func(k userKey, w FactWrite) {
		clearAt(k, w.SourceAt)
		if d, ok := deletes[k]; !ok || later(w, d) {
			deletes[k] = w
		}
	}
	for _, w := range writes {
		k := userKey{w.UserID, w.Key}
		switch {
		case w.Op == FactDelete && !w.List && itemIdentity(w.Value) != "":
			v := valueKey{k, itemIdentity(w.Value)}
			if d, ok := values[v]; !ok || later(w, d) {
				values[v] = w
			}
		case w.Op == FactDelete && !w.List:
			clearSingle(k, w)
		case w.Op == FactDelete:
			clearAt(k, w.SourceAt)
		case w.List:
			if w.Op == FactSet {
				clearAt(k, w.SourceAt.Add(-listSetGap))
				if w.Extractor == "direct" {
					if old, ok := direct[k]; !ok || w.SourceAt.Add(-listSetGap).After(old) {
						direct[k] = w.SourceAt.Add(-listSetGap)
					}
				}
			}
			items = append(items, w)
		default:
			singles = append(singles, w)
		}
		if w.List {
			causes[k] = append(causes[k], w)
		}
	}
	listKeys := sortedKeys(causes)
	// Every key the call touches, not only list keys: a delete and an older
	// set of one single-valued key in concurrent transactions would each
	// miss the other's uncommitted row and leave the older value.
	touched := make(map[userKey]bool, len(writes))
	for _, w := range writes {
		touched[userKey{w.UserID, w.Key}] = true
	}
	if err := s.lockFactKeys(ctx, sortedKeys(touched)); err != nil {
		return 0, err
	}
	if err := s.recordValueClears(ctx, values); err != nil {
		return 0, err
	}
	// A set of a value deleted no earlier is not written: its statement,
	// though retracted, still superseded the values before it, so it is a
	// clear of the key at its time.
	covered, err := s.coveredSingles(ctx, singles)
	if err != nil {
		return 0, err
	}
	kept := singles[:0]
	for i, w := range singles {
		if covered[i] {
			clearSingle(userKey{w.UserID, w.Key}, w)
		} else {
			kept = append(kept, w)
		}
	}
	singles = kept
	adopted, err := s.adoptListRows(ctx, listKeys)
	if err != nil {
		return 0, err
	}
	items = append(adopted, items...)
	if err := s.recordClears(ctx, "fact_direct_clears", direct); err != nil {
		return 0, err
	}
	if err := s.recordClears(ctx, "fact_clears", clears); err != nil {
		return 0, err
	}
	deleted, err := s.deleteSingles(ctx, deletes)
	if err != nil {
		return 0, err
	}
	retracted, err := s.deleteValues(ctx, values)
	if err != nil {
		return 0, err
	}
	set, err := s.upsertSingles(ctx, singles)
	if err != nil {
		return 0, err
	}
	if _, err := s.writeItems(ctx, listKeys, items); err != nil {
		return 0, err
	}
	listed, err := s.materialise(ctx, listKeys, causes)
	if err != nil {
		return 0, err
	}
	return deleted + retracted + set + listed, nil
}

// dropPlacedBeforeClears returns writes without those from turns that a
// clear of their key covers by the turn's place in the stream (the turn was
// in the stream when the clear was made; see StreamPosition): they are
// before the clear whatever their source time says, so, like a write stated
// no later than a clear, nothing of them is written, not even the clear a
// set or delete of theirs would record. The clear locks must be held.
func (s *Store) dropPlacedBeforeClears(ctx context.Context, writes []FactWrite) ([]FactWrite, error) {
	if !slices.ContainsFunc(writes, func(w FactWrite) bool { return w.Placed.Seq > 0 }) {
		return writes, nil
	}
	n := len(writes)
	users, keys, seqs, streams := make([]string, n), make([]string, n), make([]int64, n), make([]*time.Time, n)
	for i, w := range writes {
		users[i], keys[i], seqs[i], streams[i] = w.UserID, w.Key, int64(w.Placed.Seq), w.Placed.storedOrNil()
	}
	rows, err := s.db.Query(ctx, `
		SELECT n FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[]) WITH ORDINALITY AS w(u, k, sq, sc, n)
		WHERE EXISTS (SELECT FROM fact_clears c WHERE c.user_id = w.u AND c.key = w.k AND `+coveredByPosition("c", "w.sq", "w.sc")+`)`,
		users, keys, seqs, streams)
	if err != nil {
		return nil, fmt.Errorf("facts cleared after their turn: %w", err)
	}
	covered := make([]bool, n)
	var i int
	if _, err := pgx.ForEachRow(rows, []any{&i}, func() error {
		covered[i-1] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("facts cleared after their turn: %w", err)
	}
	kept := make([]FactWrite, 0, n)
	for i, w := range writes {
		if !covered[i] {
			kept = append(kept, w)
		}
	}
	return kept, nil
}

// valueKey names one value (by its identity, itemIdentity) of one fact of
// one user.
type valueKey struct {
	userKey
	item string
}

// later reports whether a is later than b by source time, then stream
// sequence (the turn published later: see migrations/055), then event id.
func later(a, b FactWrite) bool {
	if !a.SourceAt.Equal(b.SourceAt) {
		return a.SourceAt.After(b.SourceAt)
	}
	if a.Placed.Seq != b.Placed.Seq {
		return a.Placed.Seq > b.Placed.Seq
	}
	return a.EventID > b.EventID
}

func sortedKeys[V any](m map[userKey]V) []userKey {
	keys := make([]userKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUserKeys)
	return keys
}

// lockFactKeys takes, in a fixed order, a transaction lock on each fact key
// (an advisory lock per user, key and schema): materialising reads the
// key's present items and rewrites its facts row, and a concurrent writer of
// the same key would otherwise write a row missing this one's items; a
// delete and an older set of one key would each miss the other's row. Take
// it after lockClears and before any memory row lock. keys must be sorted.
func (s *Store) lockFactKeys(ctx context.Context, keys []userKey) error {
	if len(keys) == 0 {
		return nil
	}
	users, names := splitKeys(keys)
	if _, err := s.db.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('memoryd.factkey.' || current_schema()), hashtext(u || chr(31) || k))
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS t(u, k, n) ORDER BY n`, users, names); err != nil {
		return fmt.Errorf("lock list keys: %w", err)
	}
	return nil
}

func splitKeys(keys []userKey) (users, names []string) {
	users, names = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		users[i], names[i] = k.user, k.key
	}
	return users, names
}

// adoptListRows returns, as adds, the items of the facts rows of list keys
// that have no fact_items row at all: values stored before the key was a
// list (or by a write that does not know lists), which materialising would
// otherwise drop. Each item is the row's value split at commas and
// semicolons, stated when and where the row's value was, so that the
// result is the one these adds applied first would give.
func (s *Store) adoptListRows(ctx context.Context, keys []userKey) ([]FactWrite, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	users, names := splitKeys(keys)
	rows, err := s.db.Query(ctx, `
		SELECT f.user_id, f.key, f.value, f.source_at, f.source_seq, f.event_id, f.conversation_id, f.extractor, f.model, f.prompt_version
		FROM facts f JOIN unnest($1::text[], $2::text[]) AS t(u, k) ON f.user_id = t.u AND f.key = t.k
		WHERE NOT EXISTS (SELECT FROM fact_items i WHERE i.user_id = f.user_id AND i.key = f.key)`, users, names)
	if err != nil {
		return nil, fmt.Errorf("adopt list facts: %w", err)
	}
	var (
		adds []FactWrite
		f    FactWrite
		seq  int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&f.UserID, &f.Key, &f.Value, &f.SourceAt, &seq, &f.EventID, &f.ConversationID, &f.Extractor, &f.Model, &f.PromptVersion}, func() error {
		// Ordered as the row's value was; its stored time is not kept.
		f.Placed = StreamPosition{Seq: uint64(seq)}
		for _, it := range strings.FieldsFunc(f.Value, func(r rune) bool { return r == ',' || r == ';' }) {
			if it = strings.TrimSpace(it); itemIdentity(it) != "" {
				a := f
				a.Value, a.Op, a.List = it, FactAdd, true
				adds = append(adds, a)
			}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adopt list facts: %w", err)
	}
	return adds, nil
}

// recordClears records clears of a call in table (fact_clears, or
// fact_direct_clears for those of direct writes), each only raising the
// key's clear time.
func (s *Store) recordClears(ctx context.Context, table string, clears map[userKey]time.Time) error {
	if len(clears) == 0 {
		return nil
	}
	keys := sortedKeys(clears) // a fixed row order: concurrent writers cannot deadlock
	users, names := splitKeys(keys)
	ats := make([]time.Time, len(keys))
	for i, k := range keys {
		ats[i] = clears[k]
	}
	if _, err := s.db.Exec(ctx, `
		INSERT INTO `+table+` AS c (user_id, key, cleared_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[])
		ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at)`,
		users, names, ats); err != nil {
		return fmt.Errorf("record clears: %w", err)
	}
	return nil
}

// recordValueClears records the value deletes of a call in
// fact_value_clears, each only raising the value's clear time.
func (s *Store) recordValueClears(ctx context.Context, values map[valueKey]FactWrite) error {
	if len(values) == 0 {
		return nil
	}
	vs := sortedValues(values) // a fixed row order, as recordClears
	users, names, ids, ats := make([]string, len(vs)), make([]string, len(vs)), make([]string, len(vs)), make([]time.Time, len(vs))
	for i, v := range vs {
		users[i], names[i], ids[i], ats[i] = v.user, v.key, v.item, values[v].SourceAt
	}
	if _, err := s.db.Exec(ctx, `
		INSERT INTO fact_value_clears AS c (user_id, key, item, cleared_at)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
		ON CONFLICT (user_id, key, item) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at)`,
		users, names, ids, ats); err != nil {
		return fmt.Errorf("record value clears: %w", err)
	}
	return nil
}

func sortedValues(m map[valueKey]FactWrite) []valueKey {
	vs := make([]valueKey, 0, len(m))
	for v := range m {
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b valueKey) int {
		if c := compareUserKeys(a.userKey, b.userKey); c != 0 {
			return c
		}
		return strings.Compare(a.item, b.item)
	})
	return vs
}

// coveredSingles reports, for each single-valued set, whether a value
// delete of its value no earlier than it is recorded (fact_value_clears).
func (s *Store) coveredSingles(ctx context.Context, singles []FactWrite) ([]bool, error) {
	covered := make([]bool, len(singles))
	if len(singles) == 0 {
		return covered, nil
	}
	c := columnsOf(singles)
	ids := make([]string, len(singles))
	for i, w := range singles {
		ids[i] = itemIdentity(w.Value)
	}
	rows, err := s.db.Query(ctx, `
		SELECT n FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS w(u, k, it, a, n)
		WHERE EXISTS (SELECT FROM fact_value_clears v WHERE v.user_id = w.u AND v.key = w.k AND v.item = w.it AND v.cleared_at >= w.a)`,
		c.users, c.keys, ids, c.ats)
	if err != nil {
		return nil, fmt.Errorf("covered facts: %w", err)
	}
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&n}, func() error {
		covered[n-1] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("covered facts: %w", err)
	}
	return covered, nil
}

// deleteValues deletes the single-valued facts whose value a value delete
// of the call names and that were stated no later than it, recording each
// deletion in the history as a delete from the delete's turn, and clears
// the key at the deleted value's source time: that value had superseded
// every value before it, which must not come back. It returns how many rows
// went. The keys must be locked (lockFactKeys).
func (s *Store) deleteValues(ctx context.Context, values map[valueKey]FactWrite) (int, error) {
	if len(values) == 0 {
		return 0, nil
	}
	keys := map[userKey]bool{}
	for v := range values {
		keys[v.userKey] = true
	}
	users, names := splitKeys(sortedKeys(keys))
	rows, err := s.db.Query(ctx, `
		SELECT f.user_id, f.key, f.value, f.source_at
		FROM facts f JOIN unnest($1::text[], $2::text[]) AS t(u, k) ON f.user_id = t.u AND f.key = t.k
		ORDER BY f.user_id, f.key`, users, names)
	if err != nil {
		return 0, fmt.Errorf("delete values: %w", err)
	}
	var (
		b     changeBatch
		k     userKey
		value string
		at    time.Time
	)
	if _, err := pgx.ForEachRow(rows, []any{&k.user, &k.key, &value, &at}, func() error {
		d, ok := values[valueKey{k, itemIdentity(value)}]
		if !ok || at.After(d.SourceAt) {
			return nil
		}
		b.change(FactOpDelete, d)
		// The row as read: a facts.set in between (which takes no key
		// lock) is a statement made now and stays.
		b.dml(`
			WITH gone AS (
				DELETE FROM facts WHERE user_id = $1 AND key = $2 AND value = $3 AND source_at = $4 RETURNING source_at
			)
			INSERT INTO fact_clears AS c (user_id, key, cleared_at)
			SELECT $1, $2, source_at FROM gone
			ON CONFLICT (user_id, key) DO UPDATE SET cleared_at = greatest(c.cleared_at, excluded.cleared_at)`,
			k.user, k.key, value, at)
		b.change("", FactWrite{})
		return nil
	}); err != nil {
		return 0, fmt.Errorf("delete values: %w", err)
	}
	return s.runChanges(ctx, &b, "delete values")
}

// deleteSingles deletes the single-valued facts that a clear of the call
// covers (a value stated no later than it), recording each deletion in the
// history as a delete from the turn of the clear's write: a delete without
// a value, or a set of a value deleted later (coveredSingles). It returns
// how many rows went.
func (s *Store) deleteSingles(ctx context.Context, deletes map[userKey]FactWrite) (int, error) {
	var b changeBatch
	for _, k := range sortedKeys(deletes) {
		d := deletes[k]
		b.change(FactOpDelete, d)
		b.dml(`DELETE FROM facts WHERE user_id = $1 AND key = $2 AND source_at <= $3`, k.user, k.key, d.SourceAt)
		b.change("", FactWrite{})
	}
	return s.runChanges(ctx, &b, "delete facts")
}

// factLaterWins is the facts' rule for an insert into facts AS f of a
// single-value key the user has: the later statement wins (source time,
// then a direct write, stream position, event id, value), whoever wrote
// it. An extraction's save (upsertSingles) and a reset's write-back of
// imported lines (reinstateImportedFacts) share it.
const factLaterWins = `ON CONFLICT (user_id, key) DO UPDATE
	SET value = excluded.value, source_at = excluded.source_at, event_id = excluded.event_id,
	    conversation_id = excluded.conversation_id, extractor = excluded.extractor, model = excluded.model, prompt_version = excluded.prompt_version,
	    source_seq = excluded.source_seq, updated_at = excluded.updated_at
	WHERE (f.source_at, f.extractor = 'direct', f.source_seq, f.event_id, f.value)
	    < (excluded.source_at, excluded.extractor = 'direct', excluded.source_seq, excluded.event_id, excluded.value)`

// upsertSingles writes single-valued sets: for each key the value latest by
// (source time, direct write, stream sequence, event id, value) wins, whatever the order
// writes arrive in. A value stated no later than the key's clear is not
// written.
func (s *Store) upsertSingles(ctx context.Context, facts []FactWrite) (int, error) {
	if len(facts) == 0 {
		return 0, nil
	}
	c := columnsOf(facts)
	// DISTINCT ON keeps one row per key within the batch (the latest),
	// since ON CONFLICT cannot touch the same row twice in one statement.
	tag, err := s.db.Exec(ctx, `
		INSERT INTO facts AS f (user_id, key, value, source_at, event_id, extractor, model, prompt_version, conversation_id, source_seq, updated_at)
		SELECT DISTINCT ON (u, k) u, k, v, a, e, x, m, p, cv, sq, clock_timestamp()
		FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[])
			AS w(u, k, v, a, e, x, m, p, cv, sq)
		WHERE NOT EXISTS (SELECT FROM fact_clears c WHERE c.user_id = w.u AND c.key = w.k AND c.cleared_at >= w.a)
		ORDER BY u, k, a DESC, x = 'direct' DESC, sq DESC, e DESC, v DESC
		`+factLaterWins,
		c.users, c.keys, c.values, c.ats, c.events, c.extractors, c.models, c.prompts, c.convs, c.seqs)
	if err != nil {
		return 0, fmt.Errorf("upsert facts: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// writeItems deletes the items of keys that their key's clear covers and
// writes the items' operations, each item keeping its latest.
func (s *Store) writeItems(ctx context.Context, keys []userKey, items []FactWrite) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	users, names := splitKeys(keys)
	if _, err := s.db.Exec(ctx, `
		DELETE FROM fact_items i USING fact_clears c, unnest($1::text[], $2::text[]) AS t(u, k)
		WHERE i.user_id = t.u AND i.key = t.k AND c.user_id = t.u AND c.key = t.k AND i.source_at <= c.cleared_at`,
		users, names); err != nil {
		return 0, fmt.Errorf("delete cleared items: %w", err)
	}
	if len(items) == 0 {
		return 0, nil
	}
	c := columnsOf(items)
	ids, present := make([]string, len(items)), make([]bool, len(items))
	for i, w := range items {
		ids[i], present[i] = itemIdentity(w.Value), w.Op != FactRemove
	}
	// Same ordering as fact_items's comment says; DISTINCT ON for the same
	// reason as upsertSingles.
	tag, err := s.db.Exec(ctx, `
		INSERT INTO fact_items AS i (user_id, key, item, value, present, source_at, event_id, conversation_id, extractor, model, prompt_version, source_seq)
		SELECT DISTINCT ON (u, k, it) u, k, it, v, pr, a, e, cv, x, m, p, sq
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::timestamptz[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bigint[])
			AS w(u, k, it, v, pr, a, e, cv, x, m, p, sq)
		WHERE NOT EXISTS (SELECT FROM fact_clears c WHERE c.user_id = w.u AND c.key = w.k AND c.cleared_at >= w.a)
		ORDER BY u, k, it, a DESC, x = 'direct' DESC, sq DESC, e DESC, pr DESC, v DESC
		ON CONFLICT (user_id, key, item) DO UPDATE
		SET value = excluded.value, present = excluded.present, source_at = excluded.source_at, event_id = excluded.event_id,
		    conversation_id = excluded.conversation_id, extractor = excluded.extractor, model = excluded.model, prompt_version = excluded.prompt_version,
		    source_seq = excluded.source_seq
		WHERE (i.source_at, i.extractor = 'direct', i.source_seq, i.event_id, i.present, i.value)
		    < (excluded.source_at, excluded.extractor = 'direct', excluded.source_seq, excluded.event_id, excluded.present, excluded.value)`,
		c.users, c.keys, ids, c.values, present, c.ats, c.events, c.convs, c.extractors, c.models, c.prompts, c.seqs)
	if err != nil {
		return 0, fmt.Errorf("write items: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// factColumnsOf are FactWrites as column arrays for unnest.
type factColumnsOf struct {
	users, keys, values, events, convs, extractors, models, prompts []string
	ats                                                             []time.Time
	seqs                                                            []int64
}

func columnsOf(facts []FactWrite) factColumnsOf {
	n := len(facts)
	c := factColumnsOf{
		users: make([]string, n), keys: make([]string, n), values: make([]string, n), events: make([]string, n), convs: make([]string, n),
		extractors: make([]string, n), models: make([]string, n), prompts: make([]string, n), ats: make([]time.Time, n),
		seqs: make([]int64, n),
	}
	for i, f := range facts {
		c.users[i], c.keys[i], c.values[i], c.events[i], c.convs[i] = f.UserID, f.Key, f.Value, f.EventID, f.ConversationID
		c.extractors[i], c.models[i], c.prompts[i], c.ats[i], c.seqs[i] = f.Extractor, f.Model, f.PromptVersion, f.SourceAt, int64(f.Placed.Seq)
	}
	return c
}

// listRow is a list key's facts row as materialised.
type listRow struct {
	value, event, conv string
	at                 time.Time
	seq                int64
	Provenance
}

// Bounds on a list key's facts row. Nothing else bounds how many items a
// list collects ("I like X" after "I like Y"...), and a row larger than a
// fact value may be (the wire's 8 KiB) could not be written back by
// facts.set and would crowd an enrich's budget. Items beyond them stay
// stored and come back when newer ones are removed.
const (
	// MaxListItems is how many items a list key's row shows: the newest.
	MaxListItems = 100
	// MaxListValueBytes bounds the row's value, the wire's fact value
	// limit (events.MaxFactValueBytes).
	MaxListValueBytes = 8 << 10
)

// shownItem is a present item as materialise reads it.
type shownItem struct {
	value, event string
	at           time.Time
	seq          int64
}

// listValue joins a list's present items (in identity order) into its
// row's value: the newest items (by source time, then event id) that fit
// MaxListItems and MaxListValueBytes, in identity order. The choice depends
// on the items alone, never on the order they were written in.
func listValue(items []shownItem) string {
	keep := make([]bool, len(items))
	byAge := make([]int, len(items))
	for i := range byAge {
		byAge[i] = i
	}
	slices.SortStableFunc(byAge, func(a, b int) int {
		return cmp.Or(items[b].at.Compare(items[a].at), cmp.Compare(items[b].seq, items[a].seq), strings.Compare(items[b].event, items[a].event))
	})
	size, n := 0, 0
	for _, i := range byAge {
		add := len(items[i].value)
		if n > 0 {
			add += len(", ")
		}
		if n == MaxListItems || size+add > MaxListValueBytes {
			continue
		}
		keep[i], size, n = true, size+add, n+1
	}
	var b strings.Builder
	for i, it := range items {
		if !keep[i] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.value)
	}
	return b.String()
}

// materialise rewrites the facts row of each list key from its present
// items: the value is the items' values joined by ", " in the order of
// their identities (alphabetical), with the provenance of the newest
// item; no present item, no row. causes are the writes of the call on each
// key, which name the history entry's operation and source (see
// changeOf); a key without causes (a reset) records a plain set or clear.
// It returns how many rows it inserted, changed or deleted. keys must be
// locked (lockFactKeys).
func (s *Store) materialise(ctx context.Context, keys []userKey, causes map[userKey][]FactWrite) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	users, names := splitKeys(keys)
	rows, err := s.db.Query(ctx, `
		SELECT i.user_id, i.key, i.value, i.source_at, i.source_seq, i.event_id, i.conversation_id, i.extractor, i.model, i.prompt_version,
		       row_number() OVER (PARTITION BY i.user_id, i.key
		                          ORDER BY i.source_at DESC, i.extractor = 'direct' DESC, i.source_seq DESC, i.event_id DESC, i.item DESC) = 1
		FROM fact_items i
		JOIN unnest($1::text[], $2::text[]) AS t(u, k) ON i.user_id = t.u AND i.key = t.k
		LEFT JOIN fact_clears c ON c.user_id = i.user_id AND c.key = i.key
		WHERE i.present AND (c.cleared_at IS NULL OR i.source_at > c.cleared_at)
		ORDER BY i.user_id, i.key, i.item`, users, names)
	if err != nil {
		return 0, fmt.Errorf("materialise list facts: %w", err)
	}
	want := map[userKey]*listRow{}
	var (
		k          userKey
		it         listRow
		newest     bool
		valueParts = map[userKey][]shownItem{}
	)
	if _, err := pgx.ForEachRow(rows, []any{&k.user, &k.key, &it.value, &it.at, &it.seq, &it.event, &it.conv, &it.Extractor, &it.Model, &it.PromptVersion, &newest}, func() error {
		valueParts[k] = append(valueParts[k], shownItem{value: it.value, at: it.at, seq: it.seq, event: it.event})
		if newest {
			r := it
			want[k] = &r
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("materialise list facts: %w", err)
	}
	for k, r := range want {
		r.value = listValue(valueParts[k])
	}
	rows, err = s.db.Query(ctx, `
		SELECT f.user_id, f.key, f.value, f.source_at, f.source_seq, f.event_id, f.conversation_id, f.extractor, f.model, f.prompt_version
		FROM facts f JOIN unnest($1::text[], $2::text[]) AS t(u, k) ON f.user_id = t.u AND f.key = t.k`, users, names)
	if err != nil {
		return 0, fmt.Errorf("materialise list facts: %w", err)
	}
	have := map[userKey]listRow{}
	if _, err := pgx.ForEachRow(rows, []any{&k.user, &k.key, &it.value, &it.at, &it.seq, &it.event, &it.conv, &it.Extractor, &it.Model, &it.PromptVersion}, func() error {
		have[k] = it
		return nil
	}); err != nil {
		return 0, fmt.Errorf("materialise list facts: %w", err)
	}
	var b changeBatch
	for _, k := range keys {
		w := want[k]
		old, had := have[k]
		switch {
		case w == nil && !had, w != nil && had && w.same(old):
			continue
		case w == nil:
			b.change(changeOf(causes[k], &old.value, nil))
			b.dml(`DELETE FROM facts WHERE user_id = $1 AND key = $2`, k.user, k.key)
		default:
			var oldValue *string
			if had {
				oldValue = &old.value
			}
			b.change(changeOf(causes[k], oldValue, &w.value))
			b.dml(`
				INSERT INTO facts AS f (user_id, key, value, source_at, event_id, conversation_id, extractor, model, prompt_version, source_seq, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, clock_timestamp())
				ON CONFLICT (user_id, key) DO UPDATE
				SET value = excluded.value, source_at = excluded.source_at, event_id = excluded.event_id,
				    conversation_id = excluded.conversation_id, extractor = excluded.extractor, model = excluded.model,
				    prompt_version = excluded.prompt_version, source_seq = excluded.source_seq, updated_at = excluded.updated_at`,
				k.user, k.key, w.value, w.at, w.event, w.conv, w.Extractor, w.Model, w.PromptVersion, w.seq)
		}
		b.change("", FactWrite{})
	}
	return s.runChanges(ctx, &b, "materialise list facts")
}

func (r listRow) same(o listRow) bool {
	return r.value == o.value && r.at.Equal(o.at) && r.seq == o.seq && r.event == o.event && r.conv == o.conv && r.Provenance == o.Provenance
}

// changeOf names the operation and source a history entry records for a
// list key's change from oldValue to newValue (nil: no row) caused by
// causes, the call's writes on the key: a row deleted by a delete is a
// delete, else a remove (its last item went); a set of the list is a set;
// otherwise items only added is an add and only removed a remove, and a mix
// is the latest write's operation. The source is the latest cause of that
// operation. Without causes it is "" (the trigger's own set or clear).
func changeOf(causes []FactWrite, oldValue, newValue *string) (string, FactWrite) {
	if len(causes) == 0 {
		return "", FactWrite{}
	}
	latestOf := func(op FactOp) (FactWrite, bool) {
		var (
			l     FactWrite
			found bool
		)
		for _, c := range causes {
			if (op == "" || c.Op == op) && (!found || later(c, l)) {
				l, found = c, true
			}
		}
		return l, found
	}
	var op FactOp
	_, deleted := latestOf(FactDelete)
	_, set := latestOf(FactSet)
	switch {
	case newValue == nil && deleted:
		op = FactDelete
	case newValue == nil:
		op = FactRemove
	case set:
		op = FactSet
	default:
		before, after := listItems(oldValue), listItems(newValue)
		switch {
		case isSubset(before, after):
			op = FactAdd
		case isSubset(after, before):
			op = FactRemove
		default:
			l, _ := latestOf("")
			op = l.Op
		}
	}
	src, ok := latestOf(op)
	if !ok {
		src, _ = latestOf("")
	}
	return string(op), src
}

// listItems are the identities of a materialised list value's items.
func listItems(v *string) map[string]bool {
	items := map[string]bool{}
	if v != nil {
		for _, it := range strings.Split(*v, ", ") {
			items[itemIdentity(it)] = true
		}
	}
	return items
}

func isSubset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// changeBatch queues statements that change facts rows, each preceded by
// the history entry's operation and source (memoryd.fact_change, read by
// the trigger memoryd_fact_history, migration 017) and followed by its reset,
// and counts the rows the changes touch.
type changeBatch struct {
	b       pgx.Batch
	counted []bool
}

// change sets (op "" resets) the operation and source the trigger records.
func (c *changeBatch) change(op string, src FactWrite) {
	setting := ""
	if op != "" {
		j, _ := json.Marshal(struct {
			Op             string    `json:"op"`
			EventID        string    `json:"event_id"`
			ConversationID string    `json:"conversation_id"`
			SourceAt       time.Time `json:"source_at"`
		}{op, src.EventID, src.ConversationID, src.SourceAt.Truncate(time.Microsecond)}) // as pgx sends the row's: Postgres would round a finer time read from text
		setting = string(j)
	}
	c.b.Queue(`SELECT set_config('memoryd.fact_change', $1, true)`, setting)
	c.counted = append(c.counted, false)
}

func (c *changeBatch) dml(sql string, args ...any) {
	c.b.Queue(sql, args...)
	c.counted = append(c.counted, true)
}

// runChanges sends the batch in the current transaction and returns how
// many rows its changes touched.
func (s *Store) runChanges(ctx context.Context, c *changeBatch, what string) (int, error) {
	if len(c.counted) == 0 {
		return 0, nil
	}
	sender, ok := s.db.(interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	})
	if !ok {
		return 0, fmt.Errorf("%s: no batch support on %T", what, s.db)
	}
	res := sender.SendBatch(ctx, &c.b)
	n := 0
	for _, counted := range c.counted {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if counted {
			n += int(tag.RowsAffected())
		}
	}
	if err := res.Close(); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}
