package store_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestCancelledQueryKeepsItsConnection: with CancelOnServer, a statement
// whose context ends (enrich's reply deadline passed) is cancelled on the
// server and its connection goes back to the pool; without it (pgx's
// default, kept for the shared pool) the connection is closed. Before,
// enrich's pool had the default, so each timed-out enrich cost the enrich pool a connection,
// whose replacement ran the warm-up statements: an audit saw enrich under
// a many-user ingest fall into every reply degraded, reconnecting (439 new
// sessions in 2 minutes) faster than it answered.
func TestCancelledQueryKeepsItsConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, url := storetest.Schema(t)
	for _, cancelOnServer := range []bool{true, false} {
		s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 1, MinConns: 1, CancelOnServer: cancelOnServer, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if kept := cancelledKeepsConnection(t, s); kept != cancelOnServer {
			t.Errorf("CancelOnServer %v: connection kept after a cancelled statement: %v", cancelOnServer, kept)
		}
		s.Close()
	}
}

// cancelledKeepsConnection runs a statement past its deadline on s, a
// pool of one connection, and reports whether the pool still holds the
// connection (the same backend, no new connection).
func cancelledKeepsConnection(t *testing.T, s *store.Store) bool {
	t.Helper()
	ctx := context.Background()
	pid := func() int {
		t.Helper()
		var p int
		if err := s.Pool().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before, conns := pid(), s.Pool().Stat().NewConnsCount()
	qctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err := s.Pool().Exec(qctx, `SELECT pg_sleep(30)`)
	cancel()
	if err == nil || !errors.Is(qctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("a 30 s statement under a 50 ms deadline: %v", err)
	}
	return pid() == before && s.Pool().Stat().NewConnsCount() == conns
}
