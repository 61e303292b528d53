package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// autocommit is what a Store outside a transaction runs its queries on:
// the pool, each statement its own transaction, committed by the server
// before it answers. A write whose connection is lost once it was sent
// (the backend terminated, the connection reset before the answer) may
// have committed, as InTx's COMMIT may: its error wraps
// ErrCommitUnconfirmed, where before it was the connection's, which
// callers answered as nothing written
// (TestSingleStatementWriteCutByALostConnectionIsUnconfirmed). A read's
// error is left as it is, as is a write's the server answered (an ERROR:
// it rolled back) or one raised before anything was sent.
type autocommit struct {
	pool *pgxpool.Pool
}

// A statement is a read only when it is plainly one: once its comments
// and quoted text are blanked, it begins with SELECT, WITH, SHOW, VALUES
// or TABLE, names no writing command (an INSERT, UPDATE, also a row
// lock's FOR UPDATE, DELETE, MERGE, TRUNCATE, COPY, CALL, a SELECT
// INTO), and calls no function that writes: none of Postgres's that
// change data (writeFunctions) and only memoryd's own known to be reads
// (memorydReads), so that a writing function a later migration adds is
// taken for a write until listed. Anything else is a write: a read taken
// for one says "may have been done" when its connection is lost or its
// context ends, where a write taken for a read said nothing was done
// (TestIsWriteFailsSafe). Postgres's other functions are reads: a list of
// the reads' functions took the enrich search's NULLIF, md5 and get_byte
// for writes, so a search cut by its budget answered that its write may
// have been done.
var (
	// One pass, left to right: a comment's mark in quoted text is text,
	// and so is a quote in a comment (blanked in two passes, comments
	// first, SELECT '--' hid the rest of its line, a write in it).
	sqlBlanked   = regexp.MustCompile(`(?s)--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|"(?:[^"]|"")*"|\$([a-z_]*)\$.*?\$[a-z_]*\$`)
	readStart    = regexp.MustCompile(`(?i)^\s*(select|with|show|values|table)\b`)
	writeCommand = regexp.MustCompile(`(?i)\b(insert|update|delete|merge|truncate|copy|call|into)\b`)
	calledName   = regexp.MustCompile(`(?i)\b([a-z_][a-z0-9_$]*)\s*\(`)
)

// writeFunctions are Postgres's functions that change data (sequences,
// large objects, another database's).
var writeFunctions = setOf(`setval lo_create lo_creat lo_import lo_unlink lo_put lo_from_bytea lo_truncate lowrite dblink_exec`)

// memorydReads are memoryd's functions that write nothing, as the
// migrations define them (TestMemorydReadsMatchTheMigrations).
var memorydReads = setOf(`memoryd_camel memoryd_camel_tsvector memoryd_camel_words memoryd_changes_quiet
	memoryd_chunk_terms memoryd_cjk memoryd_fold memoryd_fold_words memoryd_item_terms memoryd_nfc memoryd_nfkc memoryd_query_terms
	memoryd_said_in memoryd_search_text memoryd_split memoryd_tsquery memoryd_tsvector
	memoryd_tsvector_base memoryd_turn_hash`)

func setOf(names string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(names) {
		m[n] = true
	}
	return m
}

// plainlyRead reports whether sql is plainly a read (see writeFunctions).
func plainlyRead(sql string) bool {
	sql = sqlBlanked.ReplaceAllStringFunc(sql, func(m string) string {
		switch {
		case strings.HasPrefix(m, "--") || strings.HasPrefix(m, "/*"):
			return " "
		case strings.HasPrefix(m, `"`):
			// A name, kept as one ("memoryd_forget_user"(...) is the
			// call it quotes), its other characters as "_".
			return strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
					return r
				}
				return '_'
			}, m[1:len(m)-1])
		}
		return "''"
	})
	if !readStart.MatchString(sql) || writeCommand.MatchString(sql) {
		return false
	}
	for _, m := range calledName.FindAllStringSubmatch(sql, -1) {
		name := strings.ToLower(m[1])
		if writeFunctions[name] || strings.HasPrefix(name, "memoryd_") && !memorydReads[name] {
			return false
		}
	}
	return true
}

// writes caches isWrite by statement: the store's SQL is a nearly fixed
// set of strings (some built from a few choices), matched once each; at
// most maxWrites are kept.
var (
	writes  sync.Map
	nWrites atomic.Int64
)

const maxWrites = 4096

func isWrite(sql string) bool {
	if w, ok := writes.Load(sql); ok {
		return w.(bool)
	}
	w := !plainlyRead(sql)
	if nWrites.Add(1) <= maxWrites {
		writes.Store(sql, w)
	}
	return w
}

// unconfirmed wraps err in ErrCommitUnconfirmed when it leaves a write
// sent on c, open when it was sent, in doubt: c was closed by it (a
// FATAL, a read or write that failed; not an ERROR, after which the
// connection goes on) and pgx does not know it for sent before anything
// was.
func unconfirmed(c *pgxpool.Conn, wasOpen bool, err error) error {
	if err == nil || !wasOpen || !c.Conn().PgConn().IsClosed() || pgconn.SafeToRetry(err) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		if sev != "FATAL" && sev != "PANIC" {
			return err
		}
	}
	return fmt.Errorf("%w: the connection was lost once the statement was sent: %w", ErrCommitUnconfirmed, err)
}

func (a autocommit) acquire(ctx context.Context) (*pgxpool.Conn, bool, error) {
	c, err := a.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	return c, !c.Conn().PgConn().IsClosed(), nil
}

func (a autocommit) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !isWrite(sql) {
		return a.pool.Exec(ctx, sql, args...)
	}
	c, open, err := a.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	tag, err := c.Exec(ctx, sql, args...)
	return tag, unconfirmed(c, open, err)
}

func (a autocommit) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !isWrite(sql) {
		return a.pool.Query(ctx, sql, args...)
	}
	c, open, err := a.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		err = unconfirmed(c, open, err)
		c.Release()
		return nil, err
	}
	return &autocommitRows{Rows: rows, c: c, open: open}, nil
}

func (a autocommit) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !isWrite(sql) {
		return a.pool.QueryRow(ctx, sql, args...)
	}
	c, open, err := a.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &autocommitRow{row: c.QueryRow(ctx, sql, args...), c: c, open: open}
}

// SendBatch runs a batch on the pool as it is: no Store method sends one
// outside a transaction.
func (a autocommit) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return a.pool.SendBatch(ctx, b)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type autocommitRow struct {
	row  pgx.Row
	c    *pgxpool.Conn
	open bool
}

// Scan releases the connection, a panic in the scan too (as pgxpool's row
// does: TestAutocommitRowReleasesItsConnectionOnAPanickingScan).
func (r *autocommitRow) Scan(dest ...any) error {
	defer r.c.Release()
	return unconfirmed(r.c, r.open, r.row.Scan(dest...))
}

// autocommitRows releases its connection once closed, and its Err then
// says whether the write may have been done.
type autocommitRows struct {
	pgx.Rows
	c      *pgxpool.Conn
	open   bool
	closed bool
	err    error
}

func (r *autocommitRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *autocommitRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = unconfirmed(r.c, r.open, r.Rows.Err())
	r.c.Release()
}

func (r *autocommitRows) Err() error {
	if !r.closed {
		return r.Rows.Err()
	}
	return r.err
}
