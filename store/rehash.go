package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// goSteps are the data migrations written in Go: each runs in the
// transaction of the SQL migration of its version, after that file's SQL.
// They are for data derived by Go functions (normalize, the content hash),
// which SQL cannot reproduce exactly.
var goSteps = map[int]func(ctx context.Context, q *Store) error{
	51: rehashContext,
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
	// Writers of the previous release wait from here to the commit: an
	// item they stored after the read below would keep its old hash.
	if _, err := q.db.Exec(ctx, `LOCK TABLE context IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return fmt.Errorf("lock context: %w", err)
	}
	var utf8 bool
	if err := q.db.QueryRow(ctx, `SELECT current_setting('server_encoding') = 'UTF8'`).Scan(&utf8); err != nil {
		return err
	}
	where := `(question !~ '^[\x01-\x7f]*$' OR answer !~ '^[\x01-\x7f]*$')`
	if utf8 {
		where += ` AND NOT (question IS NFKC NORMALIZED AND answer IS NFKC NORMALIZED)`
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
	if _, err := q.db.Exec(ctx, `
		WITH n AS (SELECT DISTINCT u, 'c:' || encode(old, 'hex') AS old, 'c:' || encode(h, 'hex') AS new
			FROM unnest($1::text[], $2::bytea[], $3::bytea[]) AS n(u, old, h)),
		moved AS (DELETE FROM import_sources i USING n WHERE i.user_id = n.u AND i.content = n.old RETURNING i.user_id, i.event_id, n.new)
		INSERT INTO import_sources (user_id, event_id, content) SELECT user_id, event_id, new FROM moved ON CONFLICT DO NOTHING`,
		srcUsers, srcOld, srcHash); err != nil {
		return fmt.Errorf("rehash import sources: %w", err)
	}
	return nil
}
