package enricher_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/events"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestStopWaitsForAnAbandonedDocumentSearch: an enrich whose document
// search it gave up at its deadline has answered, but its search still
// holds a connection of the enrich pool until the server cancels it; Stop
// waits for it (the request's slot covers it), so that no statement of the
// service is left running once Stop has returned, and does not count the
// answered request as one it cancelled.
func TestStopWaitsForAnAbandonedDocumentSearch(t *testing.T) {
	t.Parallel()
	seed := storetest.New(t)
	putDoc(t, seed, store.Owner{User: "alice"}, "kb", "handbook.md", handbook)
	upsertFacts(t, seed, store.FactWrite{UserID: "alice", Key: "name", Value: "Alice", SourceAt: t0})
	waiting := abandonedSearchLeft(t, seed)
	if waiting != 0 {
		t.Errorf("after stop: %d statements still wait for the lock; want the abandoned search ended", waiting)
	}
}

// abandonedSearchLeft runs TestStopWaitsForAnAbandonedDocumentSearch's
// enrich and Stop on a service of its own, and returns how many
// statements still wait for its lock once Stop has returned.
func abandonedSearchLeft(t *testing.T, seed *store.Store) int {
	t.Helper()
	st := serveStore(t, seed)
	defer st.Close()
	nc := connect(t)
	prefix := randomPrefix()
	svc, err := enricher.New(enricher.Config{Conn: nc, Store: st, Prefix: prefix, Logger: slog.New(slog.DiscardHandler), Timeout: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	client := events.NewClient(nc, prefix)
	req := events.EnrichRequest{UserID: "alice", Message: "which certificate authority file do TLS connections use?", Collections: []string{"kb"}}
	if r, err := client.Enrich(ctxT(t), req); err != nil || r.Degraded {
		t.Fatalf("before the lock: %v, %+v", err, r)
	}
	tx := lockDocChunks(t, seed)
	defer tx.Rollback(context.Background()) // before the next try
	var holder int
	if err := tx.QueryRow(ctxT(t), `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	r, err := client.Enrich(ctxT(t), req)
	if err != nil || !r.Degraded || len(r.Facts) != 1 {
		t.Fatalf("with the lock: %v, degraded %v (%q), %d facts", err, r.Degraded, r.Reason, len(r.Facts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	var waiting int
	// Those this test's lock holds only: the database's other tests
	// (TestEnrichKeepsMemoriesWhenDocumentsTimeOutOnServeStore's lock, in
	// parallel) were counted too.
	if err := seed.Pool().QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, holder).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting
}
