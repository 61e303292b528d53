package store

import (
	"context"
	"fmt"
	"time"
)

// Exclusively runs fn while holding the lock called name, which one process
// at a time holds across every process on the database's schema: a session
// advisory lock, on a connection of its own for the whole run, so that fn
// may use transactions and VACUUM on others. With wait it waits for the
// lock (until ctx ends); without, it returns ran false at once when another
// process holds it.
func (s *Store) Exclusively(ctx context.Context, name string, wait bool, fn func() error) (ran bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", name, err)
	}
	defer conn.Release()
	const key = `hashtextextended('memoryd.run.' || current_schema() || '.' || $1, 0)`
	got := true
	if wait {
		_, err = conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`, name)
	} else {
		err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+key+`)`, name).Scan(&got)
	}
	if err != nil || !got {
		return false, wrapLock(name, err)
	}
	defer func() {
		// Unlocked even when ctx has ended; a connection that cannot say so
		// is closed, which releases the lock with the session.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock(`+key+`)`, name); uerr != nil {
			_ = conn.Conn().Close(uctx)
		}
	}()
	return true, fn()
}

func wrapLock(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lock %s: %w", name, err)
}
