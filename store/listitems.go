package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ListItem is one present item of a list key, with the turn that stated
// it ("" for a direct write).
type ListItem struct {
	Key     string
	Value   string
	EventID string
}

// ListItems returns the present items of a user's list keys (those not
// hidden by the key's clear), by key, each key's items in the order its
// facts row lists them (their identities'). An extraction prompt reads it to
// leave out only the items a re-extracted turn stated itself, not the whole
// list.
func (s *Store) ListItems(ctx context.Context, userID string) ([]ListItem, error) {
	rows, err := s.db.Query(ctx, `
		SELECT i.key, i.value, i.event_id
		FROM fact_items i
		LEFT JOIN fact_clears c ON c.user_id = i.user_id AND c.key = i.key
		WHERE i.user_id = $1 AND i.present AND (c.cleared_at IS NULL OR i.source_at > c.cleared_at)
		ORDER BY i.key, i.item`, userID)
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ListItem, error) {
		var it ListItem
		err := row.Scan(&it.Key, &it.Value, &it.EventID)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("list items: %w", err)
	}
	return items, nil
}
