// Package store is memoryd's Postgres data layer: turns received, facts with
// their history, and context items with full-text search. All of memoryd's SQL
// lives here.
//
// A Store is safe for concurrent use. Methods run on the pool, or on a
// transaction when called on the Store handed out by InTx, so that callers can
// group writes (and River job inserts) into one atomic unit.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the connection string used when none is configured.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/memoryd?sslmode=disable"

// Config configures Open.
type Config struct {
	// URL is the Postgres connection string. Default DefaultURL. A
	// search_path query parameter selects the schema memoryd's tables live in.
	URL string
	// MaxConns caps the pool. Default: the URL's pool_max_conns parameter
	// when it has one, else 20.
	MaxConns int32
	// MinConns is how many connections Open establishes before it returns and
	// the pool keeps idle and ready afterwards (pgxpool MinConns and
	// MinIdleConns), so that the first queries after start, or after
	// Postgres comes back, do not pay for connection setup. See Warm.
	// Default 4, at most MaxConns.
	MinConns int32
	// WarmStatements makes every new connection opened ahead of use (by
	// Open, Warm, or the pool keeping MinConns) run the statements enrich
	// uses (Recall's) once before the pool hands it out, so that they are
	// prepared and the server's catalog caches loaded before the first
	// request rather than inside its budget (see warmStatements). A
	// connection opened for a statement whose context ForRequest marked
	// is not warmed: that request waits for its connection, and then
	// prepares only its own statements. For the pool enrich reads from.
	// Default false.
	WarmStatements bool
	// CancelOnServer makes a statement whose context ends be cancelled on
	// the server (a cancel request after cancelDelay) and its connection
	// kept, where pgx's default closes the connection: for enrich's pool,
	// where each request past its reply deadline otherwise cost a
	// connection and its replacement's setup and warm-up, which, on a busy
	// machine, took longer than the deadline and kept enrich degraded (an
	// audit: 439 new sessions in 2 minutes of a many-user ingest). A
	// server that neither answers nor cancels within closeDelay has the
	// connection closed, as before. The error of a statement cancelled so
	// is the server's query_canceled (SQLSTATE 57014), not ctx's: a caller
	// that tells a timeout by its error wraps it with ctx.Err(). Default
	// false.
	CancelOnServer bool
	// GiveWay, when set, is called before every statement, batch and COPY
	// the pool's connections send (not commits and rollbacks), on the
	// goroutine sending it, with the statement's context. It may block,
	// briefly and never beyond ctx, to let more urgent work on the same
	// Postgres run first: memoryd's shared pool gives way to enrich's reads
	// (internal/app). It must be safe for concurrent use. Default nil.
	GiveWay func(ctx context.Context)
	// Committed, when set, is called after every statement, batch and COPY
	// of the pool that succeeded and left its connection outside a
	// transaction (a commit, or a statement run on its own), on the
	// goroutine that sent it, with its context: memoryd serve wakes its
	// change publisher there (see QuietChanges). It must be quick and safe
	// for concurrent use. Default nil.
	Committed func(ctx context.Context)
	// QuietChanges opens the pool's connections with memoryd.change_notify
	// = off: their commits do not announce their memory changes with
	// pg_notify (migration 035), whose server-wide lock serialises every
	// notifying commit with its WAL flush. For a process that wakes its own
	// change publisher after its commits (Committed); other processes'
	// publishers then learn of these changes only by polling. Default
	// false: commits notify.
	QuietChanges bool
	// CreateDatabase creates the database named in URL when it does not exist
	// (connecting to the "postgres" database to do so). Default false.
	CreateDatabase bool
	// SchemaVersion is the newest migration the program knows (see
	// NewestMigration). When set, ForgetUser, ResetMemory and Import check,
	// inside their transaction, that no newer program migrated the database
	// further, and refuse with a *NewerSchemaError if one did: they would
	// leave out the tables it added. Default 0: not checked.
	SchemaVersion int
	// Logger receives connection diagnostics. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.MaxConns == 0 {
		c.MaxConns = 20
	}
	if c.MinConns == 0 {
		c.MinConns = min(4, c.MaxConns)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.MaxConns < 1 {
		return errors.New("store: Config.MaxConns must be at least 1")
	}
	if c.MinConns < 0 || c.MinConns > c.MaxConns {
		return fmt.Errorf("store: Config.MinConns must be between 0 and MaxConns (%d), not %d", c.MaxConns, c.MinConns)
	}
	if c.SchemaVersion < 0 {
		return fmt.Errorf("store: Config.SchemaVersion must be 0 or more, not %d", c.SchemaVersion)
	}
	if _, err := pgxpool.ParseConfig(c.URL); err != nil {
		return fmt.Errorf("store: Config.URL is not a valid connection string: %w", err)
	}
	return nil
}

// DBTX is what queries run on: the pool or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store runs memoryd's queries.
type Store struct {
	pool          *pgxpool.Pool
	db            DBTX
	hooks         *hookBox // shared by the Stores WithTx derives
	holds         *holdBox // shared alike (hold.go)
	schemaVersion int      // Config.SchemaVersion
	created       bool     // Open created the database
}

// CreatedDatabase reports whether Open created the database (it did not
// exist, and Config.CreateDatabase was set).
func (s *Store) CreatedDatabase() bool { return s.created }

// New returns a Store over an existing pool. The caller keeps ownership of the
// pool.
func New(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool, db: autocommit{pool}, hooks: &hookBox{}}
	s.holds = &holdBox{held: map[string]int{}, owner: s}
	return s
}

// cancelDelay and closeDelay are when a statement whose context ended is
// cancelled on the server, and when its connection is closed if it has not
// returned by then (see Open).
const (
	cancelDelay = 50 * time.Millisecond
	closeDelay  = 3 * time.Second
)

// DefaultConnectTimeout bounds each new Postgres connection, TLS and start-up
// included, when the URL sets no connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// parseURL parses a connection URL, with DefaultConnectTimeout when it sets
// no connect_timeout: a server that accepts connections and never answers
// (hung, or packets dropped past a proxy) held serve's start, and every new
// connection, forever and silently.
func parseURL(url string) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse url: %w", err)
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 && !connectTimeoutSet(url) {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return pcfg, nil
}

// dsnConnectTimeout finds connect_timeout in a keyword/value connection
// string.
var dsnConnectTimeout = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// connectTimeoutSet reports whether the connection string sets
// connect_timeout, 0 included: as in libpq, 0 is no bound, which the URL's
// owner asked for. (PGCONNECT_TIMEOUT, which pgx reads, is honoured unless
// it is 0: environment variables are cmd's.)
func connectTimeoutSet(connString string) bool {
	if u, err := neturl.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return u.Query().Has("connect_timeout")
	}
	return dsnConnectTimeout.MatchString(connString)
}

// Open connects to Postgres as cfg says, creating the database first when
// cfg.CreateDatabase is set and it is missing. Close the returned store's pool
// with Close.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.MaxConns == 0 && strings.Contains(cfg.URL, "pool_max_conns=") {
		// The connection string caps the pool; pgxpool has parsed it.
		if pc, err := pgxpool.ParseConfig(cfg.URL); err == nil {
			cfg.MaxConns = pc.MaxConns
		}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pcfg, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.MinConns, pcfg.MinIdleConns = cfg.MinConns, cfg.MinConns
	// pgxpool re-opens lost idle connections on its health check; a short
	// period re-warms the pool soon after an outage ends.
	pcfg.HealthCheckPeriod = healthCheckPeriod
	if cfg.GiveWay != nil || cfg.Committed != nil {
		pcfg.ConnConfig.Tracer = poolTracer{giveWay: cfg.GiveWay, committed: cfg.Committed}
	}
	// Session settings, with SET after connecting: a startup parameter
	// of memoryd's own is refused by PgBouncer ("unsupported startup
	// parameter"), which the docs put in front of Postgres. memoryd's
	// transactions are written for read committed (their locks and
	// retries): a database whose default is serializable failed 13 of 300
	// turns with 40001 in a walk.
	session := "SET default_transaction_isolation = 'read committed'"
	if cfg.QuietChanges {
		session += "; SET memoryd.change_notify = 'off'"
	}
	if cfg.CancelOnServer {
		pcfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, CancelRequestDelay: cancelDelay, DeadlineDelay: closeDelay}
		}
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		// So that pg_stat_activity and the server's logs name memoryd's
		// connections (a URL's application_name wins).
		pcfg.ConnConfig.RuntimeParams["application_name"] = ApplicationName
	}
	// The password file and TLS files are read again for each new
	// connection (rereadFiles), so that a rotated password or certificate
	// written to them is used without a restart.
	pcfg.BeforeConnect = rereadFiles(cfg.URL, cfg.Logger)
	check := &clientCheck{logger: cfg.Logger}
	pcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		// Through the connection's protocol, as clientCheck's (the
		// pool's tracer must not take it for a statement of memoryd's).
		if _, err := conn.PgConn().Exec(ctx, session).ReadAll(); err != nil {
			return fmt.Errorf("store: session settings: %w", err)
		}
		check.apply(ctx, conn)
		if cfg.WarmStatements && !forRequest(ctx) {
			warmStatements(ctx, conn, cfg.Logger)
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	err = pool.Ping(ctx)
	created := false
	if missingDatabase(err) && cfg.CreateDatabase {
		pool.Close()
		if err := createDatabase(ctx, pcfg.ConnConfig, cfg.Logger); err != nil {
			return nil, err
		}
		created = true
		if pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return nil, fmt.Errorf("store: connect: %w", err)
		}
		err = pool.Ping(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, &ConnectError{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database, Err: err}
	}
	s := New(pool)
	s.schemaVersion, s.created = cfg.SchemaVersion, created
	if err := s.Warm(ctx); err != nil {
		pool.Close()
		return nil, &ConnectError{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database, Err: err}
	}
	if err := s.checkSessions(ctx); err != nil {
		pool.Close()
		if errors.Is(err, ErrSharedSessions) {
			return nil, err
		}
		return nil, &ConnectError{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database, Err: err}
	}
	// The first reading of Postgres's clock (Clock), before anything is
	// stamped by it.
	if err := s.RefreshClock(ctx); err != nil {
		pool.Close()
		return nil, &ConnectError{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database, Err: err}
	}
	return s, nil
}

// ErrSharedSessions is Open finding two of its pool's connections on one
// Postgres session: a pooler in transaction or statement mode (PgBouncer's
// pool_mode = transaction) is in front of Postgres.
var ErrSharedSessions = errors.New("store: two connections reached the same Postgres session: a pooler in transaction or statement mode is in front of Postgres (PgBouncer: pool_mode = transaction); memoryd needs pool_mode = session, or a direct connection")

// checkSessions holds two of the pool's connections and asks each for its
// backend's pid: behind a pooler that hands out a server connection per
// transaction, two idle clients get the same one. memoryd's session
// settings, River's LISTEN and its advisory locks are per session: a walk
// through PgBouncer in transaction mode saw prepared statements collide
// (42P05) and no turn recorded in a minute, and with pgx's exec mode a
// prune's lock left on a server connection, every later prune skipped.
// No pooler, or one in session mode, never shares; a pool of one
// connection is not checked.
func (s *Store) checkSessions(ctx context.Context) error {
	if s.pool.Config().MaxConns < 2 {
		return nil
	}
	pid := func(c *pgxpool.Conn) (string, error) {
		res, err := c.Conn().PgConn().Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
		if err != nil {
			return "", fmt.Errorf("store: check sessions: %w", err)
		}
		if len(res) != 1 || len(res[0].Rows) != 1 {
			return "", errors.New("store: check sessions: pg_backend_pid() returned no row")
		}
		return string(res[0].Rows[0][0]), nil
	}
	var pids []string
	for range 2 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("store: check sessions: %w", err)
		}
		defer c.Release()
		p, err := pid(c)
		if err != nil {
			return err
		}
		pids = append(pids, p)
	}
	if pids[0] == pids[1] {
		return ErrSharedSessions
	}
	return nil
}

// clientCheckInterval is how often Postgres checks, while a statement of
// memoryd's runs, that its client is still connected
// (client_connection_check_interval, Postgres 14 and later). Without it, a
// process killed during a long statement (a replay's reset, a forget, a
// prune) leaves the statement running, with its locks, until it ends: an
// audit saw a killed replay's reset DELETE go on for ~30 s, blocking the
// next replay's reset and live extraction.
const clientCheckInterval = "2s"

// clientCheck sets clientCheckInterval on a pool's new connections when
// the server has the setting (Postgres 14 and later) and nothing set it:
// the URL (its own parameter, or options=-c), PGOPTIONS, ALTER ROLE or
// DATABASE ... SET, or the server's configuration win, and
// client_connection_check_interval=0 there turns it off. The first
// connection asks pg_settings (about 2 ms on a new backend), the others of
// the pool, alike, only set it (0.2 ms) or not. It goes through the
// connection's protocol, not pgx.Conn, so that the shared pool's tracer
// (giving way to enrich, a commit's change notification) does not take it
// for a statement of memoryd's. A failure (a platform without the check)
// is logged and leaves the connections as they are: the setting only
// frees a dead client's locks sooner.
type clientCheck struct {
	logger *slog.Logger
	state  atomic.Int32 // clientCheckUnknown, clientCheckSet or clientCheckLeave
}

const (
	clientCheckUnknown = iota
	clientCheckSet
	clientCheckLeave
)

func (c *clientCheck) apply(ctx context.Context, conn *pgx.Conn) {
	sql := "SET client_connection_check_interval = '" + clientCheckInterval + "'"
	switch c.state.Load() {
	case clientCheckLeave:
		return
	case clientCheckUnknown:
		sql = "SELECT set_config(name, '" + clientCheckInterval + "', false) FROM pg_settings " +
			"WHERE name = 'client_connection_check_interval' AND source = 'default'"
	}
	res, err := conn.PgConn().Exec(ctx, sql).ReadAll()
	switch {
	case err != nil:
		c.state.Store(clientCheckLeave)
		if c.logger != nil {
			c.logger.Debug("setting client_connection_check_interval failed", "error", err)
		}
	case len(res) == 1 && res[0].CommandTag.Select():
		if len(res[0].Rows) == 1 {
			c.state.Store(clientCheckSet)
		} else {
			c.state.Store(clientCheckLeave)
		}
	}
}

// ApplicationName is the application_name of the connections Open makes
// when the URL sets none.
const ApplicationName = "memoryd"

// healthCheckPeriod is how often the pool checks its idle connections and
// opens missing ones.
const healthCheckPeriod = 5 * time.Second

// Warm makes the pool hold at least its MinConns (at least one) live
// connections: it acquires that many at once, pings each (replacing one that
// is dead) and releases them, idle and ready. Open calls it; call it again
// after an outage so that the next queries are not the ones paying for
// connection setup.
func (s *Store) Warm(ctx context.Context) error {
	ctx = context.WithValue(ctx, requestKey{}, false) // ahead of use, whoever calls
	n := max(int(s.pool.Config().MinConns), int(s.pool.Config().MinIdleConns), 1)
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := s.acquireLive(ctx)
		if err != nil {
			return fmt.Errorf("store: warm pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// requestKey marks a context as ForRequest's.
type requestKey struct{}

// ForRequest returns ctx marked as a request's that waits for its
// statements within a budget (an enrich reply's): a connection a pool
// with Config.WarmStatements opens for them runs none of the warm-up's,
// and the request's own are prepared on it as they run. A request that
// waited for the warm-up too, on a connection opened for it after an
// outage or as the pool grew, spent 110 to 250 ms of enrich's 250 ms on
// a loaded 2-core machine (half that without it), and was degraded.
func ForRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestKey{}, true)
}

// forRequest reports whether ctx is ForRequest's. The pool opens a
// connection with the values of the context of the acquire it opens it
// for (and none for its own, keeping MinConns).
func forRequest(ctx context.Context) bool {
	v, _ := ctx.Value(requestKey{}).(bool)
	return v
}

// acquireLive acquires a connection that answers a ping. A dead one (its
// server went away while it sat idle) is closed, so that the pool drops it,
// and another is tried: at most once per connection the pool can hold, plus
// one, since after an outage every idle connection may be dead.
func (s *Store) acquireLive(ctx context.Context) (*pgxpool.Conn, error) {
	var err error
	for range int(s.pool.Config().MaxConns) + 1 {
		var c *pgxpool.Conn
		if c, err = s.pool.Acquire(ctx); err != nil {
			return nil, err
		}
		if err = c.Ping(ctx); err == nil {
			return c, nil
		}
		_ = c.Conn().Close(ctx)
		c.Release()
	}
	return nil, err
}

// ConnectError is returned by Open when Postgres cannot be reached or refuses
// the connection. Its message never contains the password (pgx redacts it).
type ConnectError struct {
	Host     string
	Port     uint16
	Database string
	Err      error
}

func (e *ConnectError) Error() string {
	return fmt.Sprintf("store: cannot connect to postgres at %s:%d database %q: %v", e.Host, e.Port, e.Database, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// DatabaseMissing reports whether the database cfg.URL names does not
// exist (Postgres answers 3D000 invalid_catalog_name); any other failure
// to connect is returned as the *ConnectError Open would return.
func DatabaseMissing(ctx context.Context, cfg Config) (bool, error) {
	cfg = cfg.withDefaults()
	pc, err := parseURL(cfg.URL) // takes the pool_ parameters out
	if err != nil {
		return false, err
	}
	cc := pc.ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cc)
	switch {
	case missingDatabase(err):
		return true, nil
	case err != nil:
		return false, &ConnectError{Host: cc.Host, Port: cc.Port, Database: cc.Database, Err: err}
	}
	_ = conn.Close(ctx)
	return false, nil
}

// missingDatabase reports whether err is Postgres saying the database
// does not exist (3D000 invalid_catalog_name).
func missingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

func createDatabase(ctx context.Context, cc *pgx.ConnConfig, logger *slog.Logger) error {
	admin := cc.Copy()
	name := admin.Database
	admin.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("store: connect to create database %q: %w", name, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		// Created concurrently by another process: duplicate_database, or
		// a unique violation on pg_database when both inserts raced.
		return nil
	}
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("store: create database %q: %w: the role %q has no CREATEDB; have an administrator run CREATE DATABASE %s OWNER %s, or fix the database name in --database-url",
			name, err, cc.User, pgx.Identifier{name}.Sanitize(), pgx.Identifier{cc.User}.Sanitize())
	}
	if err != nil {
		return fmt.Errorf("store: create database %q: %w", name, err)
	}
	logger.Info("created database", "database", name)
	return nil
}

// Pool returns the underlying pool (for River, which shares it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close ends the process's holds (Hold) and closes the pool. Only call it
// on a store from Open.
func (s *Store) Close() {
	s.holds.close()
	s.pool.Close()
}

// ErrReadOnly is in Ping's error when Postgres answers but takes no
// writes.
var ErrReadOnly = errors.New("the database takes no writes (a standby, or default_transaction_read_only on)")

// Ping checks that Postgres answers and takes writes: a standby (the old
// primary after a failover, still named by the URL) or a database set
// read-only answers every read, and refuses every write of ingest,
// extraction and the memory tools (a dependency walk: /readyz said ok
// for 40 s of failed writes).
func (s *Store) Ping(ctx context.Context) error {
	var readOnly string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&readOnly); err != nil {
		return err
	}
	if readOnly == "on" {
		return ErrReadOnly
	}
	return nil
}

// InTx runs fn in one transaction, committing when fn returns nil and rolling
// back otherwise. The Store passed to fn runs its queries in the transaction;
// tx is the same transaction, for River's *Tx methods.
//
// Once fn has returned nil, the COMMIT is not cut short by ctx's end (it
// has CommitWait of its own): a request cancelled there (serve's shutdown
// halting the requests still running) otherwise returned the cancellation
// for work that was done, which the server may have committed regardless
// (TestInTxAnswersWhatItsCommitDid). Its nil says the write was done.
// A COMMIT that does not return within CommitWait is cancelled (a cancel
// request, and the connection closed) and the error wraps
// ErrCommitUnconfirmed whatever the server did: it may commit, or roll
// back on the cancel. InTx does not tell these apart, not even on a pool
// with CancelOnServer, which waits up to closeDelay for the server's
// answer, a 57014 when it rolled back (TestInTxCommitPastItsBoundRollsBack):
// the one caller that reads the error (enrich) answers that the write may
// have been done, which holds either way, and memoryd's writes run on a
// pool without it, which closes the connection without the answer. A
// connection lost once the COMMIT was sent, within CommitWait (the
// backend terminated or the server shutting down, a FATAL; the
// connection reset or closed before the answer), leaves the write in
// doubt alike, and the error wraps ErrCommitUnconfirmed too (before, it
// was the connection's error, which callers answered as nothing written:
// TestInTxCommitCutByALostConnectionIsUnconfirmed); so does one lost
// between fn's end and the COMMIT, which the client cannot tell from it.
// Its other errors say the write was not done: fn's, BEGIN's, a COMMIT
// the server refused (an ERROR: a deferred constraint, a serialization
// failure), one never sent, or a session the server ended idle in its
// transaction (TestInTxFailureBeforeItsCommitIsPlain).
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx, q *Store) error) error {
	return runTx(ctx, s.pool, CommitWait, func(tx pgx.Tx) error { return fn(tx, s.WithTx(tx)) })
}

// runTx is InTx on db (the pool, or a connection: a migration's), fn
// given the transaction alone, its COMMIT bounded by commitWait apart
// from ctx; with commitWait 0, by ctx alone (a migration's: its COMMIT
// runs its deferred triggers over all it wrote, and may take longer than
// a request's; cut at 5 s, it was cancelled and rolled back on every run
// again: TestMigrationCommitOutlastingInTxsBoundIsApplied).
func runTx(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, commitWait time.Duration, fn func(tx pgx.Tx) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	returned := false
	defer func() {
		// On an error, and on a panic in fn (returned false, err not set:
		// a job's, which River recovers), which before left the
		// transaction open, its locks held and its connection out of
		// the pool for good (TestInTxEndsOnPanic).
		if err != nil || !returned {
			// With ctx, as pgx.BeginFunc: one ended closes the
			// connection, and the server rolls back.
			_ = tx.Rollback(ctx)
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	returned = true
	// A connection closed already cannot send the COMMIT: its error says
	// nothing was written. (pgx gives the same error for a connection
	// closed while the COMMIT's answer was read.)
	unsent := tx.Conn().PgConn().IsClosed()
	cctx := ctx
	if commitWait > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), commitWait)
		defer cancel()
	}
	if err := tx.Commit(cctx); err != nil {
		if cctx.Err() != nil && commitWait > 0 {
			// Not the caller's budget: the commit's own, and what the
			// server did is not known (TestStopAnswersAWriteWhoseCommitOutlastsTheHalt).
			return &CommitTimeoutError{Within: commitWait, Err: err}
		}
		if cctx.Err() != nil && !pgconn.SafeToRetry(err) {
			// The caller's ctx ended with the COMMIT sent (an operator's
			// interrupt of migrate): what the server did is not known.
			return fmt.Errorf("%w: the commit was interrupted: %w", ErrCommitUnconfirmed, err)
		}
		if !unsent && commitInDoubt(err) {
			return fmt.Errorf("%w: the connection was lost during the commit: %w", ErrCommitUnconfirmed, err)
		}
		return err
	}
	return nil
}

// commitInDoubt reports whether err, a COMMIT's that was sent on an open
// connection, leaves its fate unknown: anything but the server's answer
// that it rolled back (an ERROR: a deferred constraint, a serialization
// failure; or the COMMIT of a failed transaction), a session the server
// ended idle in its transaction before it read the COMMIT (25P03), and a
// write of the COMMIT that failed with nothing sent. A FATAL (the backend terminated,
// the server shutting down) may come after the commit was recorded (a
// synchronous standby's wait cut short), and a connection lost (reset,
// closed) before the answer came says nothing of what the server did
// (TestInTxCommitCutByALostConnectionIsUnconfirmed).
func commitInDoubt(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if pgErr.Code == "25P03" {
			// The server ended the session idle in its transaction
			// (idle_in_transaction_session_timeout): the COMMIT never ran
			// and the transaction rolled back, though the client reads
			// the FATAL only as the COMMIT's answer.
			return false
		}
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev == "FATAL" || sev == "PANIC"
	}
	// pgx reports a connection closed under the COMMIT's read as
	// pgconn.ErrConnClosed, safe to retry as if never sent; the
	// connection was open when the COMMIT was sent (InTx checks).
	if errors.Is(err, pgconn.ErrConnClosed) {
		return true
	}
	return !pgconn.SafeToRetry(err)
}

// CommitWait bounds a transaction's COMMIT in InTx once its work is done,
// apart from the caller's context: a commit is quick unless the server is
// lost.
const CommitWait = 5 * time.Second

// CommitBound is the longest InTx takes to return once its work is done:
// the COMMIT's own bound, then the wait for the server to act on its
// cancel request before the connection is closed. A caller that answers
// a request with InTx's result (serve's stop) waits this long for the
// answer after cancelling the request, or the write may be done and
// never answered.
const CommitBound = CommitWait + cancelDelay + closeDelay

// ErrCommitUnconfirmed is wrapped by InTx's error when the COMMIT did not
// return within its bound (CommitWait), whatever the server did then: it
// was asked to roll it back, and may have, or may have committed it (one
// that does not act on the cancel request, or acts after the connection
// closed); and when the connection was lost once the COMMIT was sent,
// before its answer. The write may have been done: read it back. The
// error also wraps the connection's, so that store.IsUnavailable and the
// like still read it.
var ErrCommitUnconfirmed = errors.New("commit not confirmed")

// CommitTimeoutError is InTx's error when its COMMIT did not return within
// its bound, Within (CommitWait): it wraps ErrCommitUnconfirmed and the
// COMMIT's error. Any other error wrapping ErrCommitUnconfirmed is a
// connection lost (or, outside InTx, a context ended) once the write was
// sent, so that a caller can say which.
type CommitTimeoutError struct {
	Within time.Duration
	Err    error
}

func (e *CommitTimeoutError) Error() string {
	return fmt.Sprintf("%v within %s: %v", ErrCommitUnconfirmed, e.Within, e.Err)
}

func (e *CommitTimeoutError) Unwrap() []error { return []error{ErrCommitUnconfirmed, e.Err} }

// WithTx returns a Store whose queries run in tx, for callers that manage
// the transaction themselves.
func (s *Store) WithTx(tx pgx.Tx) *Store {
	return &Store{pool: s.pool, db: tx, hooks: s.hooks, holds: s.holds, schemaVersion: s.schemaVersion}
}

// Provenance records what produced a memory item, so a replay with another
// model or prompt can be told apart.
type Provenance struct {
	Extractor     string
	Model         string
	PromptVersion string
}

// IsLockWait reports whether err is Postgres giving up on a lock another
// transaction holds: a lock timeout (SQLSTATE 55P03 lock_not_available, see
// SetLockTimeout), a deadlock (40P01 deadlock_detected), or a
// serialization failure (40001: a transaction that asked for repeatable
// read or serializable met a concurrent write). All are transient: the
// same work succeeds once the other transaction ends.
func IsLockWait(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// IsRolledBack reports whether err is Postgres rolling the transaction back
// to let another go on: a deadlock it broke (40P01) or a serialization
// failure (40001). Unlike a lock timeout (55P03, which waited its whole
// timeout), the other transaction is no longer held up by this one, so
// the work redone at once normally passes.
func IsRolledBack(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// IsDiskFull reports whether err is Postgres refusing a write for a full
// disk (SQLSTATE 53100 disk_full, "could not extend file ...: No space
// left on device"): every write fails until an operator frees space, while
// reads go on.
func IsDiskFull(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53100"
}

// IsReadOnly reports whether err is Postgres refusing a write because the
// database takes none (SQLSTATE 25006 read_only_sql_transaction: a
// standby after a failover, or default_transaction_read_only): every write
// fails until it takes writes again, while reads go on.
func IsReadOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
}

// IsUnavailable reports whether err may pass once the database answers
// again: any error that is not Postgres refusing the statement itself (a
// failed connection, a timeout), or one of the classes that say the
// server is going away or is short of resources (08 connection exception,
// 57P admin shutdown or cannot connect now, 53 insufficient resources). A
// missing table or a bad statement is not: waiting cannot mend it.
func IsUnavailable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	c := pgErr.Code
	return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "57P") || strings.HasPrefix(c, "53")
}

// SetLockTimeout bounds how long each statement of the current transaction
// waits for a lock; past it the statement fails with SQLSTATE 55P03 (see
// IsLockWait). Call it first on the Store InTx hands out; d is rounded up to
// a whole millisecond.
func (s *Store) SetLockTimeout(ctx context.Context, d time.Duration) error {
	if _, err := s.db.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, lockTimeoutSetting(d)); err != nil {
		return fmt.Errorf("set lock timeout: %w", err)
	}
	return nil
}

// lockTimeoutSetting is d as lock_timeout's value, rounded up to a whole
// millisecond (0 would be no timeout at all).
func lockTimeoutSetting(d time.Duration) string {
	return fmt.Sprintf("%dms", max((d+time.Millisecond-1)/time.Millisecond, 1))
}
