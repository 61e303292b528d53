package enricher_test

import (
	"context"
	"fmt"
	"log/slog"
	neturl "net/url"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEnrichAfterAnOutageWaitsForItsOwnStatementsOnly: after Postgres
// returns, an enrich request that opens a connection of a pool with
// store.Config.WarmStatements (enrich's own, as serve opens it) waits for
// that connection and its own statements, not for the warm-up of every
// statement enrich has. Before, it waited for the warm-up too: on a
// restarted Postgres, beside the backlog's ingest, 110 to 250 ms of a
// 250 ms budget, and every request arriving in the first few hundred
// milliseconds after an outage was degraded (docs/reliability.md, "Known
// latencies").
func TestEnrichAfterAnOutageWaitsForItsOwnStatementsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.Migrated(t)
	direct := storetest.Unmigrated(t, url) // migrated
	insertContext(t, direct, store.ContextWrite{UserID: "u", Question: "What is my dog called?", Answer: "Rex", CreatedAt: time.Now()})
	p := newProxy(t)
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.addr
	// One connection: the one the request opens after the outage is the
	// pool's only one.
	st, err := store.Open(ctx, store.Config{URL: u.String(), MaxConns: 1, MinConns: 1, WarmStatements: true, CancelOnServer: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	t.Cleanup(p.Close) // before the pool closes: see storeVia
	// Without the service's re-warm (Warm hidden), which would open the
	// connection ahead of the request: a request arriving before it does
	// opens its own.
	h := start(t, struct{ enricher.Store }{st}, func(c *enricher.Config) { c.Timeout = 10 * time.Second })
	req := events.EnrichRequest{UserID: "u", Message: "what is my dog called?"}
	if r := enrich(t, h, req); r.Degraded || len(r.Context) != 1 {
		t.Fatalf("before the outage: %+v", r)
	}

	p.Close() // Postgres gone: the pooled connection cut
	enrichDegraded(t, h, "u")
	// The dead connection is destroyed apart from the reply.
	eventstest.Eventually(t, "the pool to drop its dead connection", 30*time.Second, func() (bool, string) {
		stat := st.Pool().Stat()
		return stat.TotalConns() == 0, fmt.Sprintf("%+v", stat)
	})
	p.Open(false)
	if r := enrich(t, h, req); r.Degraded || len(r.Context) != 1 || r.Context[0].Answer != "Rex" {
		t.Fatalf("after Postgres returned: %+v", r)
	}
	// The warm-up prepares the scoped recall shapes, which this request,
	// with no scope, never runs.
	c, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	// The simple protocol: this query prepares nothing itself.
	res, err := c.Conn().PgConn().Exec(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, 'user_id = $1 AND scope = $') > 0`).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if n := string(res[0].Rows[0][0]); n != "0" {
		t.Fatalf("the connection the enrich request opened after the outage has %s scoped recall statements prepared: the request waited for the warm-up of statements it does not run", n)
	}
}
