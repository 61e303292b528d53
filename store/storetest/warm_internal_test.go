package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestWarmPoolIsResetAndFollowsItsSchema: New's pool outlives its test,
// refuses to be used between tests, and the next test claiming the same
// schema gets it back with its sessions as new and naming the schema by
// its new name.
func TestWarmPoolIsResetAndFollowsItsSchema(t *testing.T) {
	setupPool(t)
	ctx := context.Background()
	// A fingerprint of this test's own: no other test process claims the
	// schema given back in between.
	fp := poolSetup.fp
	poolSetup.fp = "own" + randomHex(4)
	t.Cleanup(func() { poolSetup.fp = fp })
	var (
		pool  *pgxpool.Pool
		first string
		pids  []uint32
	)
	t.Run("first", func(t *testing.T) {
		s := New(t)
		pool, first = s.Pool(), currentSchema(t, s)
		// Two sessions: the use between the tests below costs the pool one.
		for i := range 2 {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			// What a test may leave in a session.
			for _, sql := range []string{`SET statement_timeout = '1234ms'`, `SELECT pg_advisory_lock(4242 + ` + strconv.Itoa(i) + `)`, `LISTEN warm_test`, `SET search_path TO public`} {
				if _, err := c.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			pids = append(pids, c.Conn().PgConn().PID())
		}
	})
	if _, err := pool.Exec(ctx, `SELECT 1`); !errors.Is(err, errParked) {
		t.Errorf("the pool used after its test: %v, want %v", err, errParked)
	}
	t.Run("second", func(t *testing.T) {
		s := New(t)
		if s.Pool() != pool {
			t.Fatal("the next test of the process got a new pool, not the one parked with the schema")
		}
		name := currentSchema(t, s)
		if name == first {
			t.Fatalf("schema still named %s after its give-back and claim", name)
		}
		// A connection the pool opens now names it too: every idle one
		// held, the next is new.
		idle := idleConns(t, s.Pool())
		if len(idle) >= int(MaxConns) {
			t.Fatalf("%d idle connections, no room for a new one", len(idle))
		}
		fresh, err := s.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var path, app string
		err = fresh.QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('application_name')`).Scan(&path, &app)
		fresh.Release()
		if err != nil {
			t.Fatal(err)
		}
		if path != name || app != name {
			t.Errorf("a connection opened after the claim: search_path %s, application_name %s; want %s for both", path, app, name)
		}
		for _, c := range idle {
			c.Release()
		}
		// Another connection on it, as tests open: it reaches the schema.
		conn, err := pgx.Connect(ctx, URL(t, s))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM turns`); err != nil {
			t.Errorf("a connection from URL: %v", err)
		}
		conns := idleConns(t, s.Pool())
		warm := false
		for _, c := range conns {
			warm = warm || slices.Contains(pids, c.Conn().PgConn().PID())
			var timeout, path, app string
			var channels, locks int
			if err := c.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('search_path'), current_setting('application_name'),
				(SELECT count(*) FROM pg_listening_channels()), (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())`).
				Scan(&timeout, &path, &app, &channels, &locks); err != nil {
				t.Fatal(err)
			}
			if timeout != "0" || path != name || app != name || channels != 0 || locks != 0 {
				t.Errorf("session %d: statement_timeout %s, search_path %s, application_name %s, %d channels listened to, %d advisory locks; want 0, %s, %s, none, none",
					c.Conn().PgConn().PID(), timeout, path, app, channels, locks, name, name)
			}
		}
		if !warm {
			t.Errorf("none of the first test's sessions (%v) came back with the pool", pids)
		}
	})
}

// ownFingerprint gives the test a fingerprint of its own: no other test
// process claims the schemas it gives back.
func ownFingerprint(t *testing.T) {
	t.Helper()
	setupPool(t)
	fp := poolSetup.fp
	poolSetup.fp = "own" + randomHex(4)
	t.Cleanup(func() { poolSetup.fp = fp })
}

// TestWarmPoolOfASchemaMigratedClaims: Migrated claiming a schema parked
// with New's pool leaves the pool parked (none of its connections handed
// out after its test) and kept with the schema for the next New.
func TestWarmPoolOfASchemaMigratedClaims(t *testing.T) {
	ownFingerprint(t)
	ctx := context.Background()
	var (
		pool *pgxpool.Pool
		oid  uint32 // the schema's: it keeps it through the renames
	)
	t.Run("new", func(t *testing.T) {
		pool = New(t).Pool()
		if err := pool.QueryRow(ctx, `SELECT oid FROM pg_namespace WHERE nspname = current_schema()`).Scan(&oid); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("migrated", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(Migrated(t))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var got uint32
		if err := conn.QueryRow(ctx, `SELECT oid FROM pg_namespace WHERE nspname = current_schema()`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != oid {
			t.Skipf("Migrated claimed schema %s, not the one parked with the pool", cfg.RuntimeParams["search_path"])
		}
	})
	if _, err := pool.Exec(ctx, `SELECT 1`); !errors.Is(err, errParked) {
		t.Errorf("the pool of the schema Migrated claimed, used after its test: %v, want %v", err, errParked)
	}
	t.Run("new again", func(t *testing.T) {
		if New(t).Pool() != pool {
			t.Error("the next New got a new pool, not the one parked with the schema")
		}
	})
}

// TestWarmPoolSessionsLoseRoleStatementsSequences: what RESET ALL leaves in
// a session (the role set, statements PREPAREd in SQL, the sequences'
// last values) is gone when the next test gets it.
func TestWarmPoolSessionsLoseRoleStatementsSequences(t *testing.T) {
	ownFingerprint(t)
	ctx := context.Background()
	var (
		pool *pgxpool.Pool
		pid  uint32
	)
	t.Run("first", func(t *testing.T) {
		s := New(t)
		pool = s.Pool()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		pid = c.Conn().PgConn().PID()
		for _, sql := range []string{
			`SELECT nextval(oid::regclass) FROM pg_class WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace LIMIT 1`,
			`PREPARE warm_test_statement AS SELECT 1`,
			`SET ROLE pg_monitor`,
		} {
			if _, err := c.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	})
	t.Run("second", func(t *testing.T) {
		s := New(t)
		if s.Pool() != pool {
			t.Fatal("the next test of the process got a new pool, not the one parked with the schema")
		}
		conns := idleConns(t, s.Pool())
		found := false
		for _, c := range conns {
			if c.Conn().PgConn().PID() != pid {
				continue
			}
			found = true
			var user, session string
			var prepared int
			if err := c.QueryRow(ctx, `SELECT current_user, session_user, (SELECT count(*) FROM pg_prepared_statements WHERE from_sql)`).Scan(&user, &session, &prepared); err != nil {
				t.Fatal(err)
			}
			if user != session || prepared != 0 {
				t.Errorf("session %d: current_user %s (session_user %s), %d statements PREPAREd in SQL; want the session's user, none", pid, user, session, prepared)
			}
			var last int64
			// 55000: lastval is not yet defined in this session.
			if err := c.QueryRow(ctx, `SELECT lastval()`).Scan(&last); pgCode(err) != "55000" {
				t.Errorf("session %d: lastval() %d, %v; want none defined", pid, last, err)
			}
		}
		if !found {
			t.Skipf("session %d did not come back with the pool", pid)
		}
	})
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestWarmPoolForgetsHijackedConns: a connection taken out of the pool
// (River's listener hijacks one) is not held in the pool's bookkeeping
// after it is parked: the pool does not close it, so BeforeClose never
// drops it, and a pool serving test after test would keep them all.
func TestWarmPoolForgetsHijackedConns(t *testing.T) {
	ownFingerprint(t)
	ctx := context.Background()
	var pool *pgxpool.Pool
	t.Run("hijack", func(t *testing.T) {
		s := New(t)
		pool = s.Pool()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Hijack().Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
	})
	w := warmOf(t, pool)
	if w == nil {
		t.Fatal("the pool was not parked")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, held := len(w.conns), w.pool.Stat().TotalConns(); n != int(held) {
		t.Errorf("the parked pool notes %d connections, holds %d", n, held)
	}
}

// warmOf is the warm pool of pool, parked or in use.
func warmOf(t *testing.T, pool *pgxpool.Pool) *warmPool {
	t.Helper()
	warm.Lock()
	defer warm.Unlock()
	for _, p := range warm.parked {
		if p.w.pool == pool {
			return p.w
		}
	}
	return nil
}

// idleConns acquires every idle connection of pool, released when the test
// ends.
func idleConns(t *testing.T, pool *pgxpool.Pool) []*pgxpool.Conn {
	t.Helper()
	conns := pool.AcquireAllIdle(context.Background())
	t.Cleanup(func() {
		for _, c := range conns {
			c.Release()
		}
	})
	return conns
}

// TestWarmPoolClaimedBesideALeakedAcquire: a goroutine an earlier test
// leaked that still acquires from its pool (here in a loop, refused while
// the pool is parked) races nothing when the next test claims the pool:
// the claim once rewrote the configuration's connection parameters that
// each new connection's copy reads (a -race report in the claiming test).
func TestWarmPoolClaimedBesideALeakedAcquire(t *testing.T) {
	ownFingerprint(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pool *pgxpool.Pool
	t.Run("first", func(t *testing.T) {
		pool = New(t).Pool()
		if _, err := pool.Exec(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
	})
	refused := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		once := false
		for ctx.Err() == nil {
			c, err := pool.Acquire(ctx)
			if err == nil {
				c.Release()
				continue
			}
			if !once && errors.Is(err, errParked) {
				once = true
				close(refused)
			}
		}
	}()
	<-refused
	t.Run("second", func(t *testing.T) {
		s := New(t)
		if s.Pool() != pool {
			t.Skip("the next test of the process got a new pool, not the one parked with the schema")
		}
		name := currentSchema(t, s)
		cancel()
		<-done
		if got := currentSchema(t, s); got != name {
			t.Errorf("schema %s after the leaked acquires, want %s", got, name)
		}
	})
}

// TestWarmPoolForgetsPreparedStatements: a statement a test's pool
// prepared is not on its sessions in the next test: that test may change
// the table's columns, and the statement would then fail in it ("cached
// plan must not change result type", 0A000: a store test changing a
// column's collation failed so, depending on the tests its pool had
// served before).
func TestWarmPoolForgetsPreparedStatements(t *testing.T) {
	ownFingerprint(t)
	ctx := context.Background()
	// A parameter: pgx sends a statement without one as simple protocol,
	// unprepared.
	const query = `SELECT key FROM fact_history WHERE user_id = $1`
	var pool *pgxpool.Pool
	t.Run("first", func(t *testing.T) {
		pool = New(t).Pool()
		// On every session the pool opens: the next test's may be any.
		for range MaxConns {
			c, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			if _, err := c.Exec(ctx, query, "u"); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("second", func(t *testing.T) {
		s := New(t)
		if s.Pool() != pool {
			t.Skip("the next test of the process got a new pool, not the one parked with the schema")
		}
		if _, err := s.Pool().Exec(ctx, `ALTER TABLE fact_history ALTER COLUMN key TYPE varchar(200)`); err != nil {
			t.Fatal(err)
		}
		for _, c := range idleConns(t, s.Pool()) {
			if _, err := c.Exec(ctx, query, "u"); err != nil {
				t.Errorf("session %d: %s after the column's type changed: %v", c.Conn().PgConn().PID(), query, err)
			}
		}
	})
}
