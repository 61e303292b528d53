package enricher_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// docReads counts the statements a pool runs that read the documents side
// (default collections, collections, chunks), leaving out the recall
// statement, which reads whether the user has defaults itself.
type docReads struct{ n atomic.Int64 }

func (d *docReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	sql := data.SQL
	if strings.Contains(sql, "context_terms") {
		return ctx // the recall
	}
	if strings.Contains(sql, "doc_defaults") || strings.Contains(sql, "collections") || strings.Contains(sql, "chunks") {
		d.n.Add(1)
	}
	return ctx
}

func (d *docReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestEnrichReadsDocumentsOnlyWithDefaults: an enrich naming no collections
// searches the user's default collections, and a user who has none (even
// one with documents) costs no documents statement at all: the recall's
// own read of the defaults decides. A user with defaults still gets their
// chunks.
func TestEnrichReadsDocumentsOnlyWithDefaults(t *testing.T) {
	t.Parallel()
	url := storetest.Migrated(t) // a migrated schema of the pool
	st := storetest.Unmigrated(t, url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = storetest.MaxConns
	reads := &docReads{}
	cfg.ConnConfig.Tracer = reads
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	traced := store.New(pool)

	putDoc(t, st, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	putDoc(t, st, store.Owner{User: "carol"}, "kb", "handbook.md", handbook)
	if _, err := st.SetDefaultCollections(ctxT(t), "alice", []string{"kb"}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		insertContext(t, st, store.ContextWrite{UserID: u, Question: "how do TLS connections find the certificate authority?", Answer: "with the ca option", CreatedAt: t0})
	}
	h := start(t, traced, nil)
	const msg = "which certificate authority file do TLS connections use?"

	r := enrich(t, h, events.EnrichRequest{UserID: "alice", Message: msg})
	if r.Degraded || len(r.Documents) == 0 || len(r.Context) == 0 {
		t.Fatalf("alice (defaults kb): documents %+v, context %d, degraded %v", r.Documents, len(r.Context), r.Degraded)
	}
	if n := reads.n.Load(); n == 0 {
		t.Fatal("alice's chunks came without a documents statement: the counter does not see them")
	}
	for _, u := range []string{"bob", "carol"} {
		reads.n.Store(0)
		r := enrich(t, h, events.EnrichRequest{UserID: u, Message: msg})
		if r.Degraded || len(r.Context) == 0 || len(r.Documents) != 0 {
			t.Fatalf("%s (no defaults): documents %+v, context %d, degraded %v", u, r.Documents, len(r.Context), r.Degraded)
		}
		if n := reads.n.Load(); n != 0 {
			t.Fatalf("%s has no default collections, yet the enrich ran %d documents statements", u, n)
		}
	}
	// Naming a collection reads it whatever the defaults.
	reads.n.Store(0)
	r = enrich(t, h, events.EnrichRequest{UserID: "carol", Message: msg, Collections: []string{"kb"}})
	if len(r.Documents) == 0 || reads.n.Load() == 0 {
		t.Fatalf("carol naming kb: documents %+v, %d documents statements", r.Documents, reads.n.Load())
	}
}
