package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// explainConn connects to url with auto_explain loaded and logging at
// notice level every statement's plan (with settings, more SETs), and
// returns the connection, closed when the test ends, and a function
// returning the plans noticed so far. The test is skipped when the server
// has no auto_explain.
func explainConn(t *testing.T, url string, settings ...string) (*pgx.Conn, func() []string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		plans []string
	)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		plans = append(plans, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, q := range append([]string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_level = notice"}, settings...) {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Skipf("auto_explain is not available on this server (%s: %v)", q, err)
		}
	}
	return conn, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), plans...)
	}
}
