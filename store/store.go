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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the connection string used when none is configured.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/memoryd?sslmode=disable"

// Config configures Open.
type Config struct {
	// URL is the Postgres connection string. Default DefaultURL. A
	// search_path query parameter selects the schema memoryd's tables live in.
	URL string
	// MaxConns caps the pool. Default 20.
	MaxConns int32
	// CreateDatabase creates the database named in URL when it does not exist
	// (connecting to the "postgres" database to do so). Default false.
	CreateDatabase bool
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if c.MaxConns < 1 {
		return errors.New("store: Config.MaxConns must be at least 1")
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
	pool *pgxpool.Pool
	db   DBTX
}

// New returns a Store over an existing pool. The caller keeps ownership of the
// pool.
func New(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, db: pool}
}

// Open connects to Postgres as cfg says, creating the database first when
// cfg.CreateDatabase is set and it is missing. Close the returned store's pool
// with Close.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("store: parse url: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	err = pool.Ping(ctx)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "3D000" && cfg.CreateDatabase {
		pool.Close()
		if err := createDatabase(ctx, pcfg.ConnConfig, cfg.Logger); err != nil {
			return nil, err
		}
		if pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return nil, fmt.Errorf("store: connect: %w", err)
		}
		err = pool.Ping(ctx)
	}
	if err != nil {
		pool.Close()
		return nil, &ConnectError{Host: pcfg.ConnConfig.Host, Port: pcfg.ConnConfig.Port, Database: pcfg.ConnConfig.Database, Err: err}
	}
	return New(pool), nil
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
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
		return nil // created concurrently by another process
	}
	if err != nil {
		return fmt.Errorf("store: create database %q: %w", name, err)
	}
	logger.Info("created database", "database", name)
	return nil
}

// Pool returns the underlying pool (for River, which shares it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool. Only call it on a store from Open.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// InTx runs fn in one transaction, committing when fn returns nil and rolling
// back otherwise. The Store passed to fn runs its queries in the transaction;
// tx is the same transaction, for River's *Tx methods.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx, q *Store) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return fn(tx, s.WithTx(tx))
	})
}

// WithTx returns a Store whose queries run in tx, for callers that manage
// the transaction themselves.
func (s *Store) WithTx(tx pgx.Tx) *Store { return &Store{pool: s.pool, db: tx} }

// Provenance records what produced a memory item, so a replay with another
// model or prompt can be told apart.
type Provenance struct {
	Extractor     string
	Model         string
	PromptVersion string
}

// now is the database-independent clock used for direct writes.
func now() time.Time { return time.Now().UTC() }
