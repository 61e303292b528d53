package enricher_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	// A machine stalled past the search's cancel (50 ms) can have the
	// server ignore it, the statement not read yet, and pgx then close
	// the connection with the backend still waiting: asked again, up to
	// 3 times. Without the wait, every run leaves the statement.
	var waiting int
	for try := 0; try < 3; try++ {
		if waiting = abandonedSearchLeft(t, seed); waiting == 0 {
			break
		}
	}
	if waiting != 0 {
		t.Errorf("after stop: %d statements still wait for the lock; want the abandoned search ended", waiting)
	}
}

// abandonedSearchLeft runs TestStopWaitsForAnAbandonedDocumentSearch's
// enrich and Stop once, on a service of its own, and returns how many
// statements still wait for the lock once Stop has returned.
func abandonedSearchLeft(t *testing.T, seed *store.Store) int {
	t.Helper()
	st, err := store.Open(ctxT(t), store.Config{URL: storetest.URL(t, seed), MaxConns: 4, MinConns: 2, CancelOnServer: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
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
	conn, err := pgx.Connect(ctxT(t), storetest.URL(t, seed))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), `LOCK TABLE doc_chunks IN ACCESS EXCLUSIVE MODE`); err != nil {
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
	if err := seed.Pool().QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()`).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting
}
