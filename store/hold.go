package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A hold marks, across the processes sharing the database's schema, work a
// process does beyond a transaction (a forget's stream side), for as long
// as the process lives: a session advisory lock, on one connection of the
// process's own (outside the pool, opened at the first hold and closed at
// the last release). A process that dies drops its holds with its
// connection: closed by the kernel when it is killed, or, its host gone,
// by the server's TCP keepalives (asked of it at 10 s idle, then every 5 s,
// 3 unanswered: about 25 s) instead of the system's default (2 hours on
// Linux).
//
// Holds are shared (any number at once, a forget of a user and its retry)
// or alone (none other, in any process: the one finishing a forget whose
// process died). Neither waits: a hold another excludes is refused.
type holdBox struct {
	mu    sync.Mutex
	conn  *pgx.Conn      // nil while nothing is held
	held  map[string]int // by name: shared holds counted (as the session counts them), alone as -1
	owner *Store         // opens the connection
	// gen counts the connections dropped (dropConn): a release of a hold
	// taken on one dropped since does nothing, where it would otherwise
	// end a later hold of the same name (a retry of the forget) on the
	// connection opened since.
	gen    uint64
	closed bool // Store.Close ran: no connection is opened again
}

// holdKey is the advisory lock key of a hold's name, per schema.
const holdKey = `hashtextextended('memoryd.hold.' || current_schema() || '.' || $1, 0)`

// holdTimeout bounds each statement of a hold or a release: the lock is
// asked for without waiting, so only a database that does not answer
// takes longer.
const holdTimeout = 5 * time.Second

// Hold marks that this process works on name (see holdBox): alone, no
// other process may hold it, nor this one; shared, any number may, but
// none alone. ok is false when the hold is refused (another holds it
// so). release ends the hold; it is safe to call once the context has
// ended. An error (the database did not answer) means the work is not
// marked: a caller that goes on without the mark does what it did before
// holds existed.
func (s *Store) Hold(ctx context.Context, name string, alone bool) (release func(), ok bool, err error) {
	b := s.holds
	if b == nil {
		return nil, false, fmt.Errorf("hold %s: a store of a migration step or a warm-up holds nothing", name)
	}
	if err := ctx.Err(); err != nil {
		return nil, false, fmt.Errorf("hold %s: %w", name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, false, fmt.Errorf("hold %s: the store is closed", name)
	}
	if n := b.held[name]; n < 0 || (alone && n > 0) {
		// This process holds it already, and one of the two is alone (the
		// session's own locks never refuse it: asked, Postgres would grant
		// it).
		return nil, false, nil
	}
	// Not cancelled with the caller's ctx: a statement cut off mid-way
	// leaves the connection unusable, and dropping it ends the process's
	// other holds (other forgets still running). holdTimeout bounds it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), holdTimeout)
	defer cancel()
	fn := `pg_try_advisory_lock_shared`
	if alone {
		fn = `pg_try_advisory_lock`
	}
	// Asked of Postgres every time, a shared hold the session holds
	// already too (the session counts them; each release ends one): a
	// connection whose backend ended (a restart, a failover, a timeout of
	// the role's) fails the statement, where a count kept here would say
	// held on a session that holds nothing. Twice at most: the first try
	// on a connection kept open since the last hold, then on a new one
	// (the holds of the one dropped went with it).
	for attempt := 1; ; attempt++ {
		fresh := b.conn == nil
		if fresh {
			if err := b.open(ctx); err != nil {
				return nil, false, fmt.Errorf("hold %s: %w", name, err)
			}
		}
		err = b.conn.QueryRow(ctx, `SELECT `+fn+`(`+holdKey+`)`, name).Scan(&ok)
		if err == nil {
			break
		}
		b.dropConn()
		if fresh || attempt == 2 || ctx.Err() != nil {
			return nil, false, fmt.Errorf("hold %s: %w", name, err)
		}
	}
	if !ok {
		b.closeIfIdle()
		return nil, false, nil
	}
	if alone {
		b.held[name] = -1
	} else {
		b.held[name]++
	}
	return b.releaser(name), true, nil
}

// open opens the connection holds are taken on.
func (b *holdBox) open(ctx context.Context) error {
	conn, err := b.owner.ownConn(ctx)
	if err != nil {
		return err
	}
	// The server's keepalives (see holdBox; ignored on a Unix socket),
	// and no idle_session_timeout (Postgres 14 and later) a role or the
	// database may set: the connection idles for as long as a forget
	// runs, and ended, its holds would end with it.
	if _, err := conn.Exec(ctx, `SELECT set_config('tcp_keepalives_idle', '10', false),
		set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false),
		CASE WHEN current_setting('idle_session_timeout', true) IS NOT NULL THEN set_config('idle_session_timeout', '0', false) END`); err != nil {
		closeConn(conn)
		return err
	}
	b.conn = conn
	return nil
}

// releaser returns the release of one hold of name, which does its work
// once.
func (b *holdBox) releaser(name string) func() {
	var once sync.Once
	gen := b.gen // b.mu is held
	return func() { once.Do(func() { b.release(name, gen) }) }
}

func (b *holdBox) release(name string, gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.held[name]
	if !ok || gen != b.gen {
		return // the connection was dropped, and the lock with it
	}
	if n > 1 {
		b.held[name]--
	} else {
		delete(b.held, name)
	}
	fn := `pg_advisory_unlock_shared`
	if n < 0 {
		fn = `pg_advisory_unlock`
	}
	ctx, cancel := context.WithTimeout(context.Background(), holdTimeout)
	defer cancel()
	if _, err := b.conn.Exec(ctx, `SELECT `+fn+`(`+holdKey+`)`, name); err != nil {
		b.dropConn() // the lock goes with the session
		return
	}
	b.closeIfIdle()
}

// closeIfIdle closes the connection when nothing is held.
func (b *holdBox) closeIfIdle() {
	if len(b.held) == 0 && b.conn != nil {
		closeConn(b.conn)
		b.conn = nil
	}
}

// dropConn closes the connection after a failure, and forgets every hold:
// their locks end with the session.
func (b *holdBox) dropConn() {
	if b.conn != nil {
		closeConn(b.conn)
		b.conn = nil
	}
	clear(b.held)
	b.gen++
}

// close ends every hold (Store.Close).
func (b *holdBox) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropConn()
	b.closed = true
}
