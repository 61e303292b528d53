package store

import (
	"context"
	"fmt"
	"time"
)

// Tombstones returns the tombstones of the given user tokens (those that
// have one), by token: what this database knows of the forgets.
func (s *Store) Tombstones(ctx context.Context, tokens []string) (map[string]Tombstone, error) {
	return s.tombstones(ctx, tokens)
}

// plainUserID is the pattern of a user id that is its own token (see
// events.UserToken); any other id's token is a hash of it.
const plainUserID = `^[A-Za-z0-9_-]{1,64}$`

// UserIDsHolding returns the ids of the users this database holds anything
// of (turns, context, facts and their history, own document collections)
// among ids, and, when hashed is true, also every such user whose id is
// not its own token (its token is a hash: the caller compares). It reads
// the user indexes of each table; with hashed, the users of each table
// whose id is not plain, which may read a whole index: run it rarely (a
// database restored from a backup, at start).
func (s *Store) UserIDsHolding(ctx context.Context, ids []string, hashed bool) ([]string, error) {
	rows, err := s.db.Query(ctx, `
		SELECT user_id FROM turns WHERE user_id = ANY($1) OR ($2 AND user_id !~ $3)
		UNION SELECT user_id FROM context WHERE user_id = ANY($1) OR ($2 AND user_id !~ $3)
		UNION SELECT user_id FROM facts WHERE user_id = ANY($1) OR ($2 AND user_id !~ $3)
		UNION SELECT user_id FROM fact_history WHERE user_id = ANY($1) OR ($2 AND user_id !~ $3)
		UNION SELECT owner FROM collections WHERE owner_kind = 'user' AND (owner = ANY($1) OR ($2 AND owner !~ $3))`,
		ids, hashed, plainUserID)
	if err != nil {
		return nil, fmt.Errorf("users holding memory: %w", err)
	}
	var out []string
	var id string
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("users holding memory: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("users holding memory: %w", err)
	}
	return out, nil
}

// userWrittenSince reports whether anything of the user was written at or
// after t, by this database's clock: a turn received, a context item
// inserted or written again by the user (inserted_at: a store of a pair
// held, context.update, an import's direct line of it, see directWins), a
// fact inserted (an import's, whose history is the imported one) or
// changed, the language set, a document of the user's own collections
// put (put_at, or created_at for a row of before migration 066; not
// updated_at, which its chunking sets too: a document put before the
// forget and chunked after it kept the forget from being applied again,
// TestReapplyForgetPastADocumentChunkedSince). Each of these is the user's write after a forget a restored
// database did not know, which applying the forget again would delete
// (TestRestoredDatabaseKeepsEveryWriteSinceTheForget); read before, only
// the turns, inserted items, history and documents counted. Not the
// clears (context_clears, fact_direct_clears): the forget deletes all a
// clear did, and their times are when they take effect, up to the
// allowed clock skew ahead (an import's, a device's), so a clear made
// before the forget counted as written after it and the forget was
// never applied again (TestRestoredDatabaseForgetsAgainPastAClearDatedAhead).
// The clears of extraction (fact_clears, fact_value_clears) carry a
// turn's time: the turn counts by received_at.
func (s *Store) userWrittenSince(ctx context.Context, userID string, t time.Time) (bool, error) {
	var since bool
	err := s.db.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM turns WHERE user_id = $1 AND received_at >= $2)
		OR EXISTS (SELECT 1 FROM context WHERE user_id = $1 AND inserted_at >= $2)
		OR EXISTS (SELECT 1 FROM facts WHERE user_id = $1 AND created_at >= $2)
		OR EXISTS (SELECT 1 FROM fact_history WHERE user_id = $1 AND changed_at >= $2)
		OR EXISTS (SELECT 1 FROM user_languages WHERE user_id = $1 AND updated_at >= $2)
		OR EXISTS (SELECT 1 FROM documents d JOIN collections c ON c.id = d.collection_id
			WHERE c.owner_kind = 'user' AND c.owner = $1 AND coalesce(d.put_at, d.created_at) >= $2)`, userID, t).Scan(&since)
	if err != nil {
		return false, fmt.Errorf("user written since: %w", err)
	}
	return since, nil
}
