package worker_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// backendKiller is a pool's query tracer that, once armed, terminates
// the backend of the connection about to run the first statement holding
// match, and waits until the backend is gone, before pgx sends it: the
// statement then meets a connection terminated under it, as in a restart
// of Postgres or pg_terminate_backend, while the pool's other connections
// (River's) go on working.
type backendKiller struct {
	admin *pgx.Conn // not of the pool
	match string

	mu     sync.Mutex
	armed  bool
	killed *pgx.Conn // the connection terminated, until its statement ends
	kills  int
	err    error // pg_terminate_backend's failure, if any
	got    error // the terminated statement's error
}

func (k *backendKiller) arm() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armed = true
}

func (k *backendKiller) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	k.start(conn, data.SQL)
	return ctx
}

// TraceBatchStart is TraceQueryStart for a pipelined batch (the save's
// first statements are one): it matches any of the batch's statements.
func (k *backendKiller) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	sqls := make([]string, 0, data.Batch.Len())
	for _, q := range data.Batch.QueuedQueries {
		sqls = append(sqls, q.SQL)
	}
	k.start(conn, strings.Join(sqls, "\n"))
	return ctx
}

func (k *backendKiller) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (k *backendKiller) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	k.end(conn, data.Err)
}

func (k *backendKiller) start(conn *pgx.Conn, sql string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.armed || !strings.Contains(sql, k.match) {
		return
	}
	k.armed = false
	var done bool
	// With a timeout, pg_terminate_backend waits for the backend to exit
	// (Postgres 14 and later).
	if err := k.admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 30000)`, conn.PgConn().PID()).Scan(&done); err != nil || !done {
		k.err = err
		if err == nil {
			k.err = errBackendAlive
		}
		return
	}
	k.kills++
	k.killed = conn
}

func (k *backendKiller) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	k.end(conn, data.Err)
}

func (k *backendKiller) end(conn *pgx.Conn, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if conn == k.killed {
		k.killed, k.got = nil, err
	}
}

var errBackendAlive = errors.New("pg_terminate_backend: the backend did not exit")

// killBackends points e.store at a pool of its own traced by a
// backendKiller matching match, which it returns. It skips the test on a
// Postgres before 14.
func (e *env) killBackends(t *testing.T, match string) *backendKiller {
	t.Helper()
	url := storetest.Migrated(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	var version int
	if err := admin.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skipf("Postgres %d: pg_terminate_backend cannot wait for the backend to exit before 14", version)
	}
	kill := &backendKiller{admin: admin, match: match}
	e.traceStore(t, url, kill)
	return kill
}

// traceStore points e.store at a pool of its own on url, its connections
// traced by tracer.
func (e *env) traceStore(t *testing.T, url string, tracer pgx.QueryTracer) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = storetest.MaxConns
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.store = store.New(pool)
}

// TestUnreachableDatabaseWaits: an extraction job whose Postgres
// connection is terminated under it (a restart, an administrator's
// pg_terminate_backend), while River keeps working, is snoozed without
// spending an attempt: a turn with a single attempt ends processed, not
// failed, and the wait is counted in the job's metadata. Before, the run
// spent its attempt (a Postgres walk: 60 s of "too many clients" failed
// 15 of 1,480 turns with --max-attempts 3).
func TestUnreachableDatabaseWaits(t *testing.T) {
	e := setup(t)
	// The job's save sets its lock timeout first (in the batch of
	// store.LockUsersWithin): no statement of River's, nor of the job
	// before its model call, holds it.
	kill := e.killBackends(t, "set_config('lock_timeout'")

	var mu sync.Mutex
	asked := 0
	llm := aliceModel(t, func(n int) *extractortest.Reply {
		mu.Lock()
		asked = n
		mu.Unlock()
		if n == 1 {
			// The first run's save, right after this answer, meets its
			// connection terminated; the next run's does not.
			kill.arm()
		}
		return nil
	})
	e.start(llm, func(c *worker.Config) { c.MaxAttempts = 1 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})

	st := e.waitDone(1)
	kill.mu.Lock()
	kills, killErr, got := kill.kills, kill.err, kill.got
	kill.mu.Unlock()
	if killErr != nil || kills != 1 {
		t.Fatalf("backends terminated: %d (%v), want the first save's", kills, killErr)
	}
	t.Logf("the save's statement on its terminated connection failed with: %v", got)
	if got == nil {
		t.Fatal("the statement on the terminated connection did not fail")
	}
	if st.TurnsProcessed != 1 {
		turn, _ := e.store.GetTurn(e.ctx, "alice", "t1")
		t.Fatalf("turn %+v (stats %+v), want it processed: its connection was terminated under it, which is no fault of the turn's", turn, st)
	}
	if waits := e.onlyJobWaits(t, "memoryd_db_waits"); waits != 1 {
		t.Errorf("%d database waits, want 1", waits)
	}
	// Saved with the snooze by River though the job's connection was
	// gone: the wait counts as long as it lasted, the spread that
	// shortened its snooze (up to a quarter of JobRetryBase's 10 ms, 0
	// only for a spread of exactly 0 ns) credited.
	if credit := e.onlyJobWaits(t, "memoryd_db_unwaited_ms"); credit < 1 || credit > 3 {
		t.Errorf("%d ms of the database wait credited as not waited, want 1 to 3 (its spread)", credit)
	}
	if name, err := e.store.Fact(e.ctx, "alice", "name"); err != nil || name.Value != "Alice" {
		t.Errorf("alice's name = %+v, %v; want Alice", name, err)
	}
	// The next run stored what the first extracted, without asking the
	// model again (before: a model call a wait), and its tokens once.
	mu.Lock()
	defer mu.Unlock()
	alice, err := e.store.Stats(e.ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if u := alice.LLMUsage["fake"]; asked != 1 || u.PromptTokens != 10 || u.CompletionTokens != 5 {
		t.Errorf("the model was asked %d times, alice's usage %+v; want one call, its 10 prompt and 5 completion tokens counted once", asked, alice.LLMUsage)
	}
}

// TestDiskFullWaits: an extraction job whose save Postgres refuses for a
// full disk (SQLSTATE 53100 disk_full, "could not extend file ...: No
// space left on device") is snoozed without spending an attempt, as for
// a database out of reach: a turn with a single attempt ends processed
// once the disk takes writes again. Before, each run spent an attempt (a
// disk-full walk: a job ran its 5 attempts in 30 s of a full disk and was
// cancelled). The waits ask the model no more (unsavedResults). The disk
// full is a trigger on facts raising the real SQLSTATE for the save's
// first 3 fact writes.
func TestDiskFullWaits(t *testing.T) {
	e := setup(t)
	url := storetest.Migrated(t)
	e.store = storetest.Open(t, url)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	const full = 3 // fact writes refused
	if _, err := admin.Exec(ctx, `
CREATE SEQUENCE disk_full_writes;
CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- nextval is not rolled back with the refused write's transaction
	IF nextval('disk_full_writes') <= `+strconv.Itoa(full)+` THEN
		RAISE EXCEPTION 'could not extend file "base/16384/16754": No space left on device'
			USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON facts FOR EACH ROW EXECUTE FUNCTION disk_full();`); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	asked := 0
	e.start(aliceModel(t, func(n int) *extractortest.Reply {
		mu.Lock()
		defer mu.Unlock()
		asked = n
		return nil
	}), func(c *worker.Config) { c.MaxAttempts = 1 })
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})

	st := e.waitDone(1)
	var refused int64
	if err := admin.QueryRow(ctx, `SELECT last_value FROM disk_full_writes`).Scan(&refused); err != nil || refused <= full {
		t.Fatalf("fact writes tried: %d (%v), want more than the %d refused", refused, err, full)
	}
	if st.TurnsProcessed != 1 {
		turn, _ := e.store.GetTurn(e.ctx, "alice", "t1")
		t.Fatalf("turn %+v (stats %+v), want it processed: a full disk is no fault of the turn's", turn, st)
	}
	if waits := e.onlyJobWaits(t, "memoryd_db_waits"); waits != full {
		t.Errorf("%d database waits, want %d", waits, full)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked != 1 {
		t.Errorf("the model was asked %d times; want once: each run kept what the first extracted", asked)
	}
	if name, err := e.store.Fact(e.ctx, "alice", "name"); err != nil || name.Value != "Alice" {
		t.Errorf("alice's name = %+v, %v; want Alice", name, err)
	}
}
