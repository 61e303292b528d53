package store

import (
	"context"
	"fmt"
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
		// Before the clear locks (see resetLock), as UpsertFacts takes it.
		if err := q.lockResets(ctx); err != nil {
			return fmt.Errorf("save memory: %w", err)
		}
		if err := q.lockClears(ctx, users, false); err != nil {
			return fmt.Errorf("save memory: %w", err)
		}
		if _, err := q.UpsertFacts(ctx, facts); err != nil {
			return err
		}
		_, err := q.InsertContext(ctx, items)
		return err
	})
}
