package storetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Warm pools: New's pool on a reused schema outlives its test. A new
// connection costs Postgres about 27 ms of CPU on these machines (the
// fork's page faults and InitPostgres) and about as much again on its
// first statements (catalog caches filled, trigger functions compiled,
// statements parsed and planned); a run of the suite opened some 4,700,
// most of them New's, four a test. So when its test ends, New's pool is
// parked rather than closed: its sessions reset, none in use, none
// handed out. The process's next claim prefers a schema it parked a pool
// for, and gets the pool with it. A schema keeps its relations' OIDs
// through the renames of claim and give-back, so the connections'
// catalog caches stay right for it; only its name
// changes, set on each connection as it is next acquired, or as it opens
// (search_path, and application_name, by which give-back ends the
// schema's sessions).
// A pool serves one schema only, and is closed when that schema is
// dropped or claimed by another process.
type warmPool struct {
	pool *pgxpool.Pool

	mu sync.Mutex
	// name is the schema's name while its test runs; "" while parked,
	// when the pool hands out no connection and opens none.
	name  string
	gen   uint64               // bumped at each claim
	conns map[*pgx.Conn]uint64 // the gen each connection's name was set for
}

// maxWarm bounds the pools a process keeps parked: each holds up to
// MaxConns idle connections of a server shared by every test process.
const maxWarm = 3

// parkedName is the application_name of a parked pool's sessions: not a
// schema's, so that give-back does not end them.
const parkedName = "storetest_parked"

var errParked = errors.New("storetest: the store's test has ended (its pool is parked for the next test on its schema)")

// warm is the process's parked pools, by the idle name of their schema,
// the oldest first.
var warm struct {
	sync.Mutex
	parked []*parkedPool
}

type parkedPool struct {
	schema string
	w      *warmPool
}

// parkedNames is the schemas this process parked a pool for, for claim.
func parkedNames() []string {
	warm.Lock()
	defer warm.Unlock()
	names := make([]string, len(warm.parked))
	for i, p := range warm.parked {
		names[i] = p.schema
	}
	return names
}

// unpark takes the pool parked for schema, nil when none is.
func unpark(schema string) *warmPool {
	warm.Lock()
	defer warm.Unlock()
	for i, p := range warm.parked {
		if p.schema == schema {
			warm.parked = append(warm.parked[:i], warm.parked[i+1:]...)
			return p.w
		}
	}
	return nil
}

// keep parks w for schema (its idle name), closing the oldest parked pool
// beyond maxWarm.
func keep(schema string, w *warmPool) {
	warm.Lock()
	warm.parked = append(warm.parked, &parkedPool{schema: schema, w: w})
	var evicted *warmPool
	if len(warm.parked) > maxWarm {
		evicted = warm.parked[0].w
		warm.parked = warm.parked[1:]
	}
	warm.Unlock()
	if evicted != nil {
		evicted.pool.Close()
	}
}

// newWarmPool opens a pool on schema name, as Unmigrated's.
func newWarmPool(name string) (*warmPool, error) {
	cfg, err := pgxpool.ParseConfig(schemaURL(name))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = MaxConns
	checkClient(cfg)
	w := &warmPool{name: name, conns: map[*pgx.Conn]uint64{}}
	// A new connection gets the schema's present name here, on the pool's
	// copy of the configuration: claim rewriting the configuration's own
	// parameters would race a connect that copies them (a goroutine an
	// earlier test leaked, acquiring beside the claim).
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.name == "" {
			return errParked
		}
		cc.RuntimeParams["search_path"] = w.name
		cc.RuntimeParams["application_name"] = w.name
		return nil
	}
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if after != nil {
			if err := after(ctx, c); err != nil {
				return err
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.conns[c] = w.gen
		return nil
	}
	cfg.PrepareConn = w.prepare
	cfg.BeforeClose = func(c *pgx.Conn) {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.conns, c)
	}
	if w.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		return nil, err
	}
	return w, nil
}

// prepare refuses c while the pool is parked, and gives it the schema's
// present name when that changed since c last had it.
func (w *warmPool) prepare(ctx context.Context, c *pgx.Conn) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.name == "" {
		return false, errParked
	}
	if w.conns[c] == w.gen {
		return true, nil
	}
	if _, err := c.PgConn().Exec(ctx, "SET search_path TO "+pgx.Identifier{w.name}.Sanitize()+"; SET application_name TO '"+w.name+"'").ReadAll(); err != nil {
		return false, nil // closed; the pool opens another
	}
	w.conns[c] = w.gen
	return true, nil
}

// claim gives the pool to the test that claimed its schema as name.
func (w *warmPool) claim(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.name = name
	w.gen++
}

// unclaim parks again a pool just claimed and not used.
func (w *warmPool) unclaim() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.name = ""
}

// park resets the pool's sessions and stops it handing out connections,
// once its test's work is done: no connection may be in use (a test's
// goroutine still running keeps it, and the pool is not reused). It
// reports whether the pool was parked; when not, it is closed, as a test's
// pool was before.
func (w *warmPool) park() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := w.pool.AcquireAllIdle(ctx)
	// Refused from here on (prepare), then every connection of the pool
	// must be one of these: one released meanwhile would be idle, not
	// reset, and handed to the next test.
	w.mu.Lock()
	name := w.name
	w.name = ""
	w.mu.Unlock()
	ok := len(conns) > 0 && w.pool.Stat().TotalConns() == int32(len(conns))
	for _, c := range conns {
		if ok && !resetSession(ctx, c.Conn()) {
			// Closed: released, the pool drops it.
			_ = c.Conn().Close(ctx)
		}
	}
	if ok {
		w.mu.Lock()
		// The pool's connections now, those acquired here: one taken out
		// of the pool (River's listener hijacks one) is never closed by
		// it, and BeforeClose never drops it.
		held := make(map[*pgx.Conn]uint64, len(conns))
		for _, c := range conns {
			if g, ok := w.conns[c.Conn()]; ok {
				held[c.Conn()] = g
			}
		}
		w.conns = held
		w.mu.Unlock()
	}
	if !ok {
		// As a test's pool was closed before: what is still in use
		// (a test's goroutine) is waited for, and fails after.
		w.mu.Lock()
		w.name = name
		w.mu.Unlock()
	}
	for _, c := range conns {
		c.Release()
	}
	if !ok {
		w.pool.Close()
	}
	return ok
}

// resetSession undoes what a test may have left in a session: the role,
// settings (search_path and application_name among them), LISTENs,
// advisory locks, cursors, temporary tables, the sequences' last values,
// prepared statements, pgx's and those PREPAREd in SQL. It then sends the
// session's pending activity statistics, as an ended session does (see
// settle), and names it parked. pgx's statements go too: a test may
// change a table's columns (ALTER COLUMN ... TYPE), and a statement an
// earlier test prepared then fails in it with "cached plan must not
// change result type" (a store test did, now and then, depending on
// which tests its pool had served); the backend's catalog caches, the
// most of what a warm connection spares, stay.
func resetSession(ctx context.Context, c *pgx.Conn) bool {
	if c.DeallocateAll(ctx) != nil {
		return false
	}
	// The role first (RESET ALL leaves it).
	sql := "SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); CLOSE ALL; DISCARD TEMP; DISCARD SEQUENCES; "
	if serverMajor(c.PgConn()) >= 14 {
		sql += "SET client_connection_check_interval = '" + clientCheckInterval + "'; "
	}
	sql += "SET application_name TO '" + parkedName + "'; SELECT pg_stat_force_next_flush()"
	_, err := c.PgConn().Exec(ctx, sql).ReadAll()
	return err == nil
}
