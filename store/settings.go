package store

import (
	"context"
	"fmt"
)

// AutovacuumOff reports whether the server runs no autovacuum: the setting
// is off, or track_counts is, without which autovacuum cannot tell which
// tables need it. memoryd's change outbox, River's jobs and the turns'
// status updates leave dead rows at the rate of ingest; without vacuum
// their tables grow, and so does every read that passes over them.
func (s *Store) AutovacuumOff(ctx context.Context) (bool, error) {
	var off bool
	err := s.pool.QueryRow(ctx, `SELECT current_setting('autovacuum') = 'off' OR current_setting('track_counts') = 'off'`).Scan(&off)
	if err != nil {
		return false, fmt.Errorf("store: autovacuum setting: %w", err)
	}
	return off, nil
}
