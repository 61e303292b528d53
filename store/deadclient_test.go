package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// deadClientURL, set in a child test process's environment, makes
// TestStatementOfADeadClientEnds the child: it runs a long statement there
// until it is killed.
const deadClientURL = "MEMORYD_TEST_DEAD_CLIENT_URL"

// TestStatementOfADeadClientEnds: Postgres ends a statement of memoryd's
// once its process is killed (client_connection_check_interval), with its
// transaction and locks. Before, a replay killed during its reset left the
// reset's DELETE running for ~30 s, blocking the next replay's reset and
// live extraction; here, a 10-minute statement held its lock for 10
// minutes. The client is another process killed with SIGKILL: closing a
// connection in-process is not the same, since pgx then sends a cancel
// request of its own.
func TestStatementOfADeadClientEnds(t *testing.T) {
	if url := os.Getenv(deadClientURL); url != "" {
		runDeadClient(url)
		return
	}
	t.Parallel()
	ctx := context.Background()
	storetest.SkipBefore14(t)
	_, url := storetest.Schema(t)
	// The child prints its backend's pid, then runs the statement.
	pid, kill := storetest.StartChild(t, "TestStatementOfADeadClientEnds", deadClientURL+"="+url)
	admin, err := pgx.Connect(ctx, storetest.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	running := func() string {
		var q string
		err := admin.QueryRow(ctx, `SELECT query FROM pg_stat_activity WHERE pid = $1 AND state = 'active'`, pid).Scan(&q)
		if err == pgx.ErrNoRows {
			return ""
		}
		if err != nil {
			return err.Error()
		}
		return q
	}
	eventstest.Eventually(t, "the child's statement running", 30*time.Second, func() (bool, string) {
		q := running()
		return strings.Contains(q, "pg_sleep"), q
	})
	kill()
	eventstest.Eventually(t, "the killed client's statement ended by the server", time.Minute, func() (bool, string) {
		q := running()
		return q == "", fmt.Sprintf("backend %d still runs %q", pid, q)
	})
}

// runDeadClient is the child: a statement on a store's connection that
// holds a lock for 10 minutes, unless the process dies first.
func runDeadClient(url string) {
	ctx := context.Background()
	s, err := store.Open(ctx, store.Config{URL: url, MaxConns: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	conn, err := s.Pool().Acquire(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	storetest.PrintBackend(conn.Conn())
	_, err = conn.Exec(ctx, "BEGIN; SELECT pg_advisory_xact_lock(7171); SELECT pg_sleep(600); COMMIT")
	fmt.Fprintln(os.Stderr, "the statement ended:", err)
	os.Exit(1)
}

// TestClientCheckIntervalSetUnlessSetBefore: a store's connections check
// their client every 2 s, unless the setting was made before they set it
// (here the URL's options=-c; ALTER ROLE or DATABASE ... SET, PGOPTIONS and
// postgresql.conf are seen the same way, by pg_settings' source): an
// operator's value, or 0 to turn it off, wins. Before, only a URL parameter of the setting's own name was
// seen, and any other was overwritten with 2 s.
func TestClientCheckIntervalSetUnlessSetBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	storetest.SkipBefore14(t)
	_, base := storetest.Schema(t)
	options := func(o string) string { return "&options=" + strings.ReplaceAll(url.QueryEscape(o), "+", "%20") }
	for _, tc := range []struct{ extra, want string }{
		{"", "2s"},
		{options("-c client_connection_check_interval=5s"), "5s"},
		{options("-c client_connection_check_interval=0"), "0"},
		{"&client_connection_check_interval=7s", "7s"},
	} {
		s, err := store.Open(ctx, store.Config{URL: base + tc.extra, MaxConns: 2, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		// Two connections held at once: the pool's first, which asks
		// the server, and another, which does as the first found.
		var (
			got   []string
			conns []*pgxpool.Conn
		)
		for range 2 {
			c, err := s.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var v string
			if err := c.QueryRow(ctx, "SHOW client_connection_check_interval").Scan(&v); err != nil {
				t.Fatal(err)
			}
			got = append(got, v)
		}
		for _, c := range conns {
			c.Release()
		}
		s.Close()
		if got[0] != tc.want || got[1] != tc.want {
			t.Errorf("URL ...%s: client_connection_check_interval %v, want %s on both connections", tc.extra, got, tc.want)
		}
	}
}
