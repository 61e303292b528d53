package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Deployment is what a database serves: the NATS subject prefix whose
// memory it holds, and the turn stream it was recorded with (migration
// 039). A database serves one prefix.
type Deployment struct {
	Prefix, Stream string
	// Since is when it was recorded.
	Since time.Time
}

// Deployment returns what the database serves; ok is false when nothing is
// recorded yet (a new database, or one last used by a memoryd before
// migration 039, including one not migrated that far).
func (s *Store) Deployment(ctx context.Context) (d Deployment, ok bool, err error) {
	var exists bool
	if err := s.db.QueryRow(ctx, `SELECT to_regclass('deployment') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return d, false, wrapDeployment(err)
	}
	err = s.db.QueryRow(ctx, `SELECT prefix, stream, claimed_at FROM deployment`).Scan(&d.Prefix, &d.Stream, &d.Since)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	return d, err == nil, wrapDeployment(err)
}

// ClaimDeployment records prefix and stream as what the database serves
// when nothing is recorded yet, and returns what is recorded then: the
// caller's, or the one another process recorded first.
func (s *Store) ClaimDeployment(ctx context.Context, prefix, stream string) (Deployment, error) {
	if _, err := s.db.Exec(ctx, `INSERT INTO deployment (prefix, stream) VALUES ($1, $2) ON CONFLICT (one) DO NOTHING`, prefix, stream); err != nil {
		return Deployment{}, wrapDeployment(err)
	}
	d, _, err := s.Deployment(ctx)
	return d, err
}

// SetDeployment records prefix and stream as what the database serves,
// replacing what was recorded: an operator moving a deployment to another
// prefix, all its processes stopped.
func (s *Store) SetDeployment(ctx context.Context, prefix, stream string) error {
	_, err := s.db.Exec(ctx, `INSERT INTO deployment (prefix, stream) VALUES ($1, $2)
		ON CONFLICT (one) DO UPDATE SET prefix = excluded.prefix, stream = excluded.stream, claimed_at = now()`, prefix, stream)
	return wrapDeployment(err)
}

func wrapDeployment(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("deployment: %w", err)
}
