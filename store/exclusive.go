package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Exclusively runs fn while holding the lock called name, which one process
// at a time holds across every process on the database's schema: a session
// advisory lock, on a connection of its own for the whole run, so that fn
// may use transactions and VACUUM on others. With wait it waits for the
// lock (until ctx ends); without, it returns ran false at once when another
// process holds it.
//
// The connection is opened for the run, as the pool's are, outside the
// pool (as ListenChanges's): fn's statements take the pool's connections,
// and one held for the run left none with pool_max_conns 1 (fn waited for
// it until ctx ended), nor with 2 when two runs held one each (a prune
// and a request sent alone after a model server crash, worker).
func (s *Store) Exclusively(ctx context.Context, name string, wait bool, fn func() error) (ran bool, err error) {
	conn, err := s.ownConn(ctx)
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", name, err)
	}
	defer closeConn(conn)
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
		// Unlocked even when ctx has ended, before the connection is
		// closed: its backend ends after the close returns, and the lock
		// with it, so that a try just after would find it still held.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, `SELECT pg_advisory_unlock(`+key+`)`, name)
	}()
	return true, fn()
}

// closeConn closes a connection of ownConn's, within 5 s whatever the
// caller's context (Exclusively, holds).
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

// ownConn opens a connection like the pool's, outside it (Exclusively,
// ListenChanges), without the pool's statement hooks.
func (s *Store) ownConn(ctx context.Context) (*pgx.Conn, error) {
	pc := s.pool.Config() // a copy
	cc := pc.ConnConfig
	cc.Tracer = nil // the pool's hooks are for its statements (Config.GiveWay, Committed)
	// As the pool's new connections are made: Open's BeforeConnect reads
	// the password file and TLS files again (rereadFiles).
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cc); err != nil {
			return nil, err
		}
	}
	return pgx.ConnectConfig(ctx, cc)
}

func wrapLock(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("lock %s: %w", name, err)
}
