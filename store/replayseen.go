package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"time"
)

// A replay --reset first reads the turn stream through and records what it
// holds here (replay_seen, one check at a time under its id); the reset is
// refused when it would delete memory extracted from recorded turns the
// stream no longer holds. Keys are hashes (seenKey), never ids.

// seenKey is the key replay_seen holds for a turn: SHA-256 of the user id's
// length in bytes, ':', the user id and the event id. seenKeySQL computes
// the same of a turns row t.
func seenKey(userID, eventID string) []byte {
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(userID)) + ":" + userID + eventID))
	return h.Sum(nil)
}

// The length is of the id in UTF-8, as Go's, whatever the database's
// encoding.
const seenKeySQL = `sha256(convert_to(length(convert_to(t.user_id, 'UTF8'))::text || ':' || t.user_id || t.event_id, 'UTF8'))`

// RecordSeen records turns read from the stream under check.
func (s *Store) RecordSeen(ctx context.Context, check int64, turns []Turn) error {
	keys := make([][]byte, len(turns))
	for i, t := range turns {
		keys[i] = seenKey(t.UserID, t.EventID)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO replay_seen (check_id, key) SELECT $1, unnest($2::bytea[])`, check, keys); err != nil {
		return fmt.Errorf("record seen turns: %w", err)
	}
	return nil
}

// DropSeen deletes check's rows, and those of checks older than a week (a
// replay killed during its check; a check of a very large stream may take
// hours).
func (s *Store) DropSeen(ctx context.Context, check int64) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM replay_seen WHERE check_id = $1 OR at < now() - interval '7 days'`, check); err != nil {
		return fmt.Errorf("drop seen turns: %w", err)
	}
	return nil
}

// DatabaseNow is the database's clock.
func (s *Store) DatabaseNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return now, fmt.Errorf("database time: %w", err)
	}
	return now, nil
}

// UnseenMemory counts what ResetMemory(userIDs) would delete (every user's
// when userIDs is empty) that was extracted from turns received before
// before that check did not see: their events are gone from the stream
// (retention, a deletion, a stream deleted and created again), or no
// longer valid, and no replay can rebuild what came of them. Turns received
// from before on are left out: live ingest records them while the check
// reads.
func (s *Store) UnseenMemory(ctx context.Context, check int64, userIDs []string, before time.Time) (Unreplayable, error) {
	var u Unreplayable
	var first, last int64
	err := s.db.QueryRow(ctx, `
		WITH lost AS (
			SELECT t.user_id, t.event_id, t.stream_seq FROM turns t
			WHERE ($1 OR t.user_id = ANY($2)) AND t.received_at < $4
			  AND NOT EXISTS (SELECT 1 FROM replay_seen r WHERE r.check_id = $3 AND r.key = `+seenKeySQL+`)
		), items AS (
			SELECT x.user_id, x.event_id FROM fact_items x JOIN lost l ON l.user_id = x.user_id AND l.event_id = x.event_id
			WHERE `+rebuilt(importedItem)+`
			UNION ALL
			SELECT x.user_id, x.event_id FROM facts x JOIN lost l ON l.user_id = x.user_id AND l.event_id = x.event_id
			WHERE `+rebuilt(importedFact)+` AND NOT `+listFactKept+`
			UNION ALL
			SELECT x.user_id, x.event_id FROM context x JOIN lost l ON l.user_id = x.user_id AND l.event_id = x.event_id
			WHERE `+rebuilt(importedContext)+` AND NOT `+clearedTurn+`
		)
		SELECT count(*), count(DISTINCT (i.user_id, i.event_id)), count(DISTINCT i.user_id),
		       coalesce(min(l.stream_seq), 0), coalesce(max(l.stream_seq), 0)
		FROM items i JOIN lost l ON l.user_id = i.user_id AND l.event_id = i.event_id`,
		len(userIDs) == 0, userIDs, check, before).Scan(&u.Items, &u.Turns, &u.Users, &first, &last)
	if err != nil {
		return u, fmt.Errorf("unreplayable memory: %w", err)
	}
	u.FirstSeq, u.LastSeq = uint64(max(first, 0)), uint64(max(last, 0))
	return u, nil
}
