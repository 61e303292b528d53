package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SaveMemory writes an extraction's memory, facts (UpsertFacts) then
// items (InsertContext), in the current transaction (or one of its own).
// It first takes the clear locks of every user of either, in user order,
// as a reset of several users takes them: each call taking its own users'
// locks, a save with facts of bob alone and items of alice and bob held
// bob's while asking for alice's, which a reset of both held while asking
// for bob's (40P01, TestSaveOfTwoUsersBesideResetOfBoth).
func (s *Store) SaveMemory(ctx context.Context, facts []FactWrite, items []ContextWrite) error {
	if len(facts) == 0 && len(items) == 0 {
		return nil
	}
	users := make([]string, 0, len(facts)+len(items))
	for _, f := range facts {
		users = append(users, f.UserID)
	}
	for _, it := range items {
		users = append(users, it.UserID)
	}
	return s.inTx(ctx, func(q *Store) error {
		// The reset lock before the clear locks (see resetLock), as
		// UpsertFacts takes them, in one round trip; the writes below then
		// do not ask for them again (four round trips a save with facts
		// and items).
		if err := q.lockResetsAndClears(ctx, users); err != nil {
			return fmt.Errorf("save memory: %w", err)
		}
		if _, err := q.upsertFacts(ctx, facts, true); err != nil {
			return err
		}
		_, err := q.insertContextItems(ctx, items, true)
		return err
	})
}

// lockResetsAndClears is lockResets then lockClears (shared) of userIDs,
// sent as one pipelined batch, in the current transaction. The server runs
// them in order; an error is the first that failed (a lock timeout,
// 55P03), and the transaction is then aborted.
func (s *Store) lockResetsAndClears(ctx context.Context, userIDs []string) error {
	tx, ok := s.db.(pgx.Tx)
	if !ok {
		return fmt.Errorf("lock resets and clears: no transaction (%T)", s.db)
	}
	var b pgx.Batch
	b.Queue(lockResetsSQL)
	b.Queue(lockClearsSQL("pg_advisory_xact_lock_shared"), userIDs)
	res := tx.SendBatch(ctx, &b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return batchError("lock resets and clears", "lock resets", err)
	}
	if _, err := res.Exec(); err != nil {
		return batchError("lock resets and clears", "lock clears", err)
	}
	if err := res.Close(); err != nil {
		return batchError("lock resets and clears", "lock clears", err)
	}
	return nil
}
