package store

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// goSteps are the data migrations written in Go: each runs in the
// transaction of the SQL migration of its version, after that file's SQL.
// They are for data derived by Go functions (normalize, the content hash),
// which SQL cannot reproduce exactly.
var goSteps = map[int]func(ctx context.Context, q *Store) error{
	51: func(ctx context.Context, q *Store) error {
		// Writers of the previous release wait from here to the commit:
		// what they stored after the reads below would keep its old form.
		// One statement, so that the three are taken together, before the
		// per-key locks materialise takes (a writer holding one of those
		// waits here, not in between).
		if _, err := q.db.Exec(ctx, `LOCK TABLE context, fact_items, fact_value_clears IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock memory tables: %w", err)
		}
		// The code below is today's, which reads and writes the columns
		// migration 055 adds: preSteps added them, before this
		// transaction.
		if err := rehashContext(ctx, q); err != nil {
			return err
		}
		return reidentifyItems(ctx, q)
	},
}

// preSteps are statements run before the migration of their version, in a
// short transaction of their own: the schema today's code in a goStep
// needs. An ALTER TABLE holds its table's exclusive lock to the end of its
// transaction, so one inside the step's transaction would keep every read
// of the table waiting for the whole step.
var preSteps = map[int]string{
	// Migration 055's columns (it adds them only if missing), which
	// 051's step reads and writes (materialise, reidentifyItems).
	51: `ALTER TABLE facts ADD COLUMN IF NOT EXISTS source_seq bigint NOT NULL DEFAULT 0;
		ALTER TABLE fact_items ADD COLUMN IF NOT EXISTS source_seq bigint NOT NULL DEFAULT 0`,
}

// notNFKC is a condition on the text columns cols under which their
// normalize may differ from legacyNormalize: text outside ASCII that, on a
// UTF8 database, Postgres does not find in NFKC already. Postgres's Unicode
// tables may be older than Go's (Postgres 15: Unicode 14; x/text: 15), so
// a character given a compatibility mapping since (U+1E030, say) passes
// as NFKC and its item keeps the old hash: a twin at worst, as before.
// Reading every non-ASCII item instead would read all of a CJK database
// while writers wait.
func notNFKC(ctx context.Context, q *Store, cols ...string) (string, error) {
	var utf8 bool
	if err := q.db.QueryRow(ctx, `SELECT current_setting('server_encoding') = 'UTF8'`).Scan(&utf8); err != nil {
		return "", err
	}
	var any, all []string
	for _, c := range cols {
		any = append(any, c+` !~ '^[\x01-\x7f]*$'`)
		all = append(all, c+` IS NFKC NORMALIZED`)
	}
	where := "(" + strings.Join(any, " OR ") + ")"
	if utf8 {
		where += " AND NOT (" + strings.Join(all, " AND ") + ")"
	}
	return where, nil
}

// rehashContext moves the context items stored before migration 051 to the
// content hash of today's normalize, which puts text in Unicode NFKC: an
// item whose text NFKC changes (a decomposed accent, full-width letters, a
// ligature) was hashed as other text than its ordinary form, so the two
// forms were two items. Items whose new hashes meet (such twins, of one
// user) become one: the oldest row stays, with the latest time of the
// group, as a new duplicate would have made it; the others are deleted, a
// context.deleted change each (migration 024's trigger). A moved item's
// vectors and import records follow it to the new hash, since its text is
// unchanged.
//
// The clears recorded before (context_clears) keep their hashes, which are
// one-way; InsertContext and the import match legacyNormalize's hashes too
// (clearKeys).
//
// Only items with text outside ASCII can move, and on a UTF8 database only
// those Postgres does not find in NFKC already, so on most databases this
// reads a handful of rows.
func rehashContext(ctx context.Context, q *Store) error {
	where, err := notNFKC(ctx, q, "question", "answer")
	if err != nil {
		return err
	}
	type item struct {
		id        int64
		user      string
		old, hash []byte
		at        time.Time
	}
	rows, err := q.db.Query(ctx, `SELECT id, user_id, question, answer, content_hash, created_at FROM context WHERE `+where)
	if err != nil {
		return err
	}
	var (
		moving           []item
		it               item
		question, answer string
	)
	if _, err := pgx.ForEachRow(rows, []any{&it.id, &it.user, &question, &answer, &it.old, &it.at}, func() error {
		it.hash = ContentHash(it.user, question, answer)
		if string(it.hash) != string(it.old) {
			moving = append(moving, item{id: it.id, user: it.user, old: slices.Clone(it.old), hash: it.hash, at: it.at})
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read items: %w", err)
	}
	if len(moving) == 0 {
		return nil
	}

	// The items that already hold a new hash (the NFC twin of an NFD
	// item) and do not move themselves.
	users, hashes, ids := make([]string, len(moving)), make([][]byte, len(moving)), make([]int64, len(moving))
	for i, m := range moving {
		users[i], hashes[i], ids[i] = m.user, m.hash, m.id
	}
	rows, err = q.db.Query(ctx, `SELECT c.id, c.user_id, c.content_hash, c.created_at
		FROM context c JOIN (SELECT DISTINCT u, h FROM unnest($1::text[], $2::bytea[]) AS n(u, h)) n ON c.user_id = n.u AND c.content_hash = n.h
		WHERE c.id <> ALL($3)`, users, hashes, ids)
	if err != nil {
		return err
	}
	holders, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (item, error) {
		var h item
		err := row.Scan(&h.id, &h.user, &h.hash, &h.at)
		h.old = h.hash
		return h, err
	})
	if err != nil {
		return fmt.Errorf("read holders: %w", err)
	}

	type group struct{ user, hash string }
	groups := map[group][]item{}
	for _, m := range append(moving, holders...) {
		g := group{m.user, string(m.hash)}
		groups[g] = append(groups[g], m)
	}
	var (
		gone, keepIDs, moveIDs []int64
		keepOld, keepHash      [][]byte
		keepAt                 []time.Time
		srcUsers               []string
		srcOld, srcHash        [][]byte
	)
	for _, members := range groups {
		slices.SortFunc(members, func(a, b item) int { return cmp.Compare(a.id, b.id) })
		keep := members[0]
		for _, m := range members[1:] {
			gone = append(gone, m.id)
			if m.at.After(keep.at) {
				keep.at = m.at
			}
		}
		keepIDs, keepOld, keepHash, keepAt = append(keepIDs, keep.id), append(keepOld, keep.old), append(keepHash, keep.hash), append(keepAt, keep.at)
		if string(keep.old) != string(keep.hash) {
			moveIDs = append(moveIDs, keep.id)
		}
		for _, m := range members {
			if string(m.old) != string(m.hash) {
				srcUsers, srcOld, srcHash = append(srcUsers, m.user), append(srcOld, m.old), append(srcHash, m.hash)
			}
		}
	}

	if _, err := q.db.Exec(ctx, `DELETE FROM context WHERE id = ANY($1)`, gone); err != nil {
		return fmt.Errorf("delete merged items: %w", err)
	}
	// Two steps, so that no row takes a hash another still holds until
	// its own update (a unique index is checked row by row): first a
	// placeholder of the row's own (no SHA-256 is 9 bytes long).
	if _, err := q.db.Exec(ctx, `UPDATE context SET content_hash = '\x00'::bytea || int8send(id) WHERE id = ANY($1)`, moveIDs); err != nil {
		return fmt.Errorf("rehash items: %w", err)
	}
	if _, err := q.db.Exec(ctx, `UPDATE context c SET content_hash = n.h, created_at = greatest(c.created_at, n.t)
		FROM unnest($1::bigint[], $2::bytea[], $3::timestamptz[]) AS n(id, h, t) WHERE c.id = n.id`,
		keepIDs, keepHash, keepAt); err != nil {
		return fmt.Errorf("rehash items: %w", err)
	}
	// A kept item's vectors were of its unchanged text.
	if _, err := q.db.Exec(ctx, `UPDATE context_embeddings e SET content_hash = n.h
		FROM unnest($1::bigint[], $2::bytea[], $3::bytea[]) AS n(id, old, h) WHERE e.context_id = n.id AND e.content_hash = n.old`,
		keepIDs, keepOld, keepHash); err != nil {
		return fmt.Errorf("rehash vectors: %w", err)
	}
	// What an import recorded of a moved item names its content hash
	// (migration 036), for a replay's reset to keep it.
	olds, news := make([]string, len(srcOld)), make([]string, len(srcOld))
	for i := range srcOld {
		olds[i], news[i] = "c:"+hex.EncodeToString(srcOld[i]), "c:"+hex.EncodeToString(srcHash[i])
	}
	return moveImportSources(ctx, q, srcUsers, olds, news)
}

// reidentifyItems moves list items (fact_items) and value deletes
// (fact_value_clears) to today's itemIdentity, which puts values in NFKC,
// as rehashContext does context items. Items of one key whose identities
// meet become one, the latest operation by fact_items's order; a value
// delete keeps the latest time. The keys whose items merged are
// materialised again, so their facts row lists each item once (a
// fact.set change when the value changed).
func reidentifyItems(ctx context.Context, q *Store) error {
	where, err := notNFKC(ctx, q, "value")
	if err != nil {
		return err
	}
	rows, err := q.db.Query(ctx, `SELECT user_id, key, item, value FROM fact_items WHERE `+where)
	if err != nil {
		return err
	}
	var users, keys, olds, news []string
	var u, k, item, value string
	if _, err := pgx.ForEachRow(rows, []any{&u, &k, &item, &value}, func() error {
		if id := itemIdentity(value); id != item {
			users, keys, olds, news = append(users, u), append(keys, k), append(olds, item), append(news, id)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read list items: %w", err)
	}
	if len(users) > 0 {
		// Each moved item with the rows already at its new identity: the
		// latest operation (fact_items's order, as writeItems keeps it)
		// stays, under the new identity.
		if _, err := q.db.Exec(ctx, `
			WITH n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS n(u, k, old, new)),
			members AS (
				DELETE FROM fact_items i USING n
				WHERE i.user_id = n.u AND i.key = n.k AND (i.item = n.old OR i.item = n.new)
				RETURNING i.*, n.new AS identity
			)
			INSERT INTO fact_items (user_id, key, item, value, present, source_at, event_id, conversation_id, extractor, model, prompt_version, source_seq)
			SELECT DISTINCT ON (user_id, key, identity) user_id, key, identity, value, present, source_at, event_id, conversation_id, extractor, model, prompt_version, source_seq
			FROM members
			ORDER BY user_id, key, identity, source_at DESC, extractor = 'direct' DESC, source_seq DESC, event_id DESC, present DESC, value DESC`,
			users, keys, olds, news); err != nil {
			return fmt.Errorf("merge list items: %w", err)
		}
		contents, moved := make([]string, len(users)), make([]string, len(users))
		for i := range users {
			contents[i], moved[i] = "i:"+keys[i]+":"+olds[i], "i:"+keys[i]+":"+news[i]
		}
		if err := moveImportSources(ctx, q, users, contents, moved); err != nil {
			return err
		}
		changed := map[userKey]bool{}
		for i := range users {
			changed[userKey{users[i], keys[i]}] = true
		}
		sorted := sortedKeys(changed)
		if err := q.lockFactKeys(ctx, sorted); err != nil {
			return err
		}
		if _, err := q.materialise(ctx, sorted, nil); err != nil {
			return fmt.Errorf("materialise merged lists: %w", err)
		}
	}

	// Value deletes hold the identity alone.
	where, err = notNFKC(ctx, q, "item")
	if err != nil {
		return err
	}
	rows, err = q.db.Query(ctx, `SELECT user_id, key, item FROM fact_value_clears WHERE `+where)
	if err != nil {
		return err
	}
	users, keys, olds, news = nil, nil, nil, nil
	if _, err := pgx.ForEachRow(rows, []any{&u, &k, &item}, func() error {
		if id := itemIdentity(item); id != item {
			users, keys, olds, news = append(users, u), append(keys, k), append(olds, item), append(news, id)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("read value deletes: %w", err)
	}
	if len(users) == 0 {
		return nil
	}
	if _, err := q.db.Exec(ctx, `
		WITH n AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS n(u, k, old, new)),
		members AS (
			DELETE FROM fact_value_clears c USING n
			WHERE c.user_id = n.u AND c.key = n.k AND (c.item = n.old OR c.item = n.new)
			RETURNING c.user_id, c.key, n.new AS identity, c.cleared_at
		)
		INSERT INTO fact_value_clears (user_id, key, item, cleared_at)
		SELECT user_id, key, identity, max(cleared_at) FROM members GROUP BY user_id, key, identity`,
		users, keys, olds, news); err != nil {
		return fmt.Errorf("merge value deletes: %w", err)
	}
	return nil
}

// moveImportSources renames what imports recorded (import_sources, migration
// 036) of each users[i] from olds[i] to news[i]: a content fingerprint that
// a migration changed, so that a replay's reset still keeps the row.
func moveImportSources(ctx context.Context, q *Store, users, olds, news []string) error {
	if _, err := q.db.Exec(ctx, `
		WITH n AS (SELECT DISTINCT u, old, new FROM unnest($1::text[], $2::text[], $3::text[]) AS n(u, old, new)),
		moved AS (DELETE FROM import_sources i USING n WHERE i.user_id = n.u AND i.content = n.old RETURNING i.user_id, i.event_id, n.new)
		INSERT INTO import_sources (user_id, event_id, content) SELECT user_id, event_id, new FROM moved ON CONFLICT DO NOTHING`,
		users, olds, news); err != nil {
		return fmt.Errorf("move import sources: %w", err)
	}
	return nil
}
