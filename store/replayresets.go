package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ResetMark is a reset of memory (ResetMemory) whose replay has not yet read
// the turn stream back: until it has, its users have only what the replay
// rebuilt so far.
type ResetMark struct {
	ID int64
	// Users is how many users the reset covered; 0: every user.
	Users int
	// StartedAt is when the reset committed (Postgres's clock).
	StartedAt time.Time
	// Committed is Postgres's clock read at the end of the reset's
	// transaction, its locks held (set by ResetMemory only): a turn
	// processed since (MarkProcessed stamps the clock after its save's
	// clear locks) was saved after the reset, which deleted none of its
	// items (RequeueTurns).
	Committed time.Time `db:"-"`
}

// userKeySQL is the SQL for the key of the user id the text expression id
// holds, as migration 037 keys the change counter: what memory_change_seqs
// and replay_resets hold of a user, so that nothing of the id itself
// outlives a forget.
func userKeySQL(id string) string {
	return `sha256(convert_to(` + id + `, 'UTF8'))`
}

// userKeysSQL is the SQL for the keys of the user ids in the text[] parameter
// p.
func userKeysSQL(p string) string {
	return `(SELECT coalesce(array_agg(` + userKeySQL("u") + `), '{}') FROM unnest(` + p + `::text[]) AS u)`
}

// markReset records, in ResetMemory's transaction, the reset of userIDs
// (every user when empty) in mark. Of the users named it keeps those with
// recorded turns, the only ones a reset takes memory from (see rebuilt),
// and leaves no mark when none has any: a user forgotten while the reset
// waited for their rows (the forget committed first) is not kept, so
// nothing of them outlives the forget.
func (s *Store) markReset(ctx context.Context, userIDs []string, mark *ResetMark) error {
	if len(userIDs) == 0 {
		err := s.db.QueryRow(ctx, `INSERT INTO replay_resets (user_keys) VALUES (NULL) RETURNING id, started_at`).Scan(&mark.ID, &mark.StartedAt)
		if err != nil {
			return fmt.Errorf("reset: mark: %w", err)
		}
		return nil
	}
	err := s.db.QueryRow(ctx, `
		WITH keys AS (
			SELECT array_agg(DISTINCT `+userKeySQL("u")+`) AS k FROM unnest($1::text[]) AS u
			WHERE EXISTS (SELECT 1 FROM turns t WHERE t.user_id = u)
		)
		INSERT INTO replay_resets (user_keys) SELECT k FROM keys WHERE k IS NOT NULL
		RETURNING id, cardinality(user_keys), started_at`, userIDs).Scan(&mark.ID, &mark.Users, &mark.StartedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		*mark = ResetMark{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset: mark: %w", err)
	}
	return nil
}

// UnfinishedResets lists the resets whose replay has not read the stream
// back, oldest first.
func (s *Store) UnfinishedResets(ctx context.Context) ([]ResetMark, error) {
	rows, err := s.db.Query(ctx, `SELECT id, coalesce(cardinality(user_keys), 0), started_at FROM replay_resets ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("unfinished resets: %w", err)
	}
	marks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ResetMark])
	if err != nil {
		return nil, fmt.Errorf("unfinished resets: %w", err)
	}
	return marks, nil
}

// FinishResets is called by a replay that has read and enqueued every event
// of its scope (userIDs, every user when empty), from the start of the
// stream when whole. It deletes its own reset's mark (own, 0 when it did
// not reset) and, when whole, the marks of earlier resets (listed in
// before, as UnfinishedResets gave them when it began) whose users it
// covers: it rebuilt what they deleted. A reset that began after the
// replay did is not covered (its deletes may have followed the replay's
// reads). It returns how many earlier resets' marks went (its own is not
// counted).
func (s *Store) FinishResets(ctx context.Context, own int64, before []ResetMark, userIDs []string, whole bool) (int64, error) {
	ids := []int64{}
	if whole {
		for _, m := range before {
			ids = append(ids, m.ID)
		}
	}
	var earlier int64
	err := s.db.QueryRow(ctx, `WITH gone AS (
			DELETE FROM replay_resets
			WHERE id = $1 OR (id = ANY($2) AND (coalesce(cardinality($3::text[]), 0) = 0 OR (user_keys IS NOT NULL AND user_keys <@ `+userKeysSQL("$3")+`)))
			RETURNING id)
		SELECT count(*) FILTER (WHERE id <> $1) FROM gone`,
		own, ids, userIDs).Scan(&earlier)
	if err != nil {
		return 0, fmt.Errorf("finish resets: %w", err)
	}
	return earlier, nil
}

// forgetResetMarks removes the user from the marks of unfinished resets,
// inside ForgetUser's transaction; a mark of that user alone goes (the
// forget deleted everything the replay would have rebuilt).
func (s *Store) forgetResetMarks(ctx context.Context, userID string) error {
	if _, err := s.db.Exec(ctx, `UPDATE replay_resets SET user_keys = array_remove(user_keys, `+userKeySQL("$1::text")+`)
		WHERE `+userKeySQL("$1::text")+` = ANY(user_keys)`, userID); err != nil {
		return fmt.Errorf("forget reset marks: %w", err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM replay_resets WHERE user_keys = '{}'`); err != nil {
		return fmt.Errorf("forget reset marks: %w", err)
	}
	return nil
}
