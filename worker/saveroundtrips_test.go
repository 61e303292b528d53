package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/extractor/extractortest"
	"github.com/memoryd/memoryd/store/storetest"
)

// roundTrips is a pool's tracer that records, connection by connection,
// each round trip a statement or a pipelined batch makes, as its SQL (a
// batch's statements joined by " | ").
type roundTrips struct {
	mu    sync.Mutex
	conns map[*pgx.Conn][]string
}

func oneLine(sql string) string { return strings.Join(strings.Fields(sql), " ") }

func (r *roundTrips) add(conn *pgx.Conn, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns[conn] = append(r.conns[conn], s)
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(conn, oneLine(d.SQL))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	sqls := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		sqls = append(sqls, oneLine(q.SQL))
	}
	r.add(conn, strings.Join(sqls, " | "))
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// transactions returns the transactions recorded (begin to commit or
// rollback) whose round trips hold match.
func (r *roundTrips) transactions(match string) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]string
	for _, trips := range r.conns {
		var tx []string
		for _, s := range trips {
			switch {
			case s == "begin":
				tx = []string{s}
			case tx != nil:
				tx = append(tx, s)
				if s == "commit" || s == "rollback" {
					if strings.Contains(strings.Join(tx, "\n"), match) {
						out = append(out, tx)
					}
					tx = nil
				}
			}
		}
	}
	return out
}

// traceRoundTrips points e.store at a pool of its own traced by the
// returned roundTrips.
func (e *env) traceRoundTrips(t *testing.T) *roundTrips {
	t.Helper()
	r := &roundTrips{conns: map[*pgx.Conn][]string{}}
	e.traceStore(t, storetest.Migrated(t), r)
	return r
}

// TestSaveRoundTrips pins the round trips to Postgres of an extraction
// job's save, one turn whose model call gave a fact: each is a wake-up of
// a Postgres backend and of serve, and they bounded ingest on two shared
// cores (docs/performance.md). The lock timeout, the user's lock and the
// tombstones go as one pipelined batch, and so do the reset and clear
// locks, which the save's fact and item writes no longer ask for again.
// Before, the save made 17 round trips.
func TestSaveRoundTrips(t *testing.T) {
	e := setup(t)
	trips := e.traceRoundTrips(t)
	llm := aliceModel(t, func(int) *extractortest.Reply { return nil })
	e.start(llm, nil)
	e.publish(events.Turn{ID: "t1", UserID: "alice", UserMessage: "My name is Alice."})
	e.waitDone(1)
	if name, err := e.store.Fact(e.ctx, "alice", "name"); err != nil || name.Value != "Alice" {
		t.Fatalf("alice's name = %+v, %v; want Alice", name, err)
	}
	saves := trips.transactions("'lock_timeout'")
	if len(saves) != 1 {
		t.Fatalf("%d save transactions traced, want 1: %q", len(saves), saves)
	}
	save := saves[0]
	var list strings.Builder
	for i, s := range save {
		fmt.Fprintf(&list, "\n%2d %.160s", i+1, s)
	}
	t.Logf("the save's round trips:%s", list.String())
	const want = 12
	if len(save) > want {
		t.Errorf("the save made %d round trips, want at most %d:%s", len(save), want, list.String())
	}
}
