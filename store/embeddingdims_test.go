package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store/storetest"
)

// TestEmbeddingDimsBesideAConcurrentRecord: a worker recording a model's
// dimensions while another's record of the same model commits gets the
// other's, not an error that spends the embed job's attempt.
func TestEmbeddingDimsBesideAConcurrentRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.New(t)
	first, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Rollback(ctx)
	if _, err := first.Exec(ctx, `INSERT INTO embedding_models (model, dims) VALUES ('m', 16)`); err != nil {
		t.Fatal(err)
	}
	type result struct {
		dims int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		d, err := s.EmbeddingDims(ctx, "m", 8)
		done <- result{d, err}
	}()
	// The first's backend: pg_stat_activity is the whole server's, and
	// other tests record models too.
	var holder int
	if err := first.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	eventstest.Eventually(t, "the second record waiting for the first", 30*time.Second, func() (bool, string) {
		var n int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '%INSERT INTO embedding_models%'`, holder).Scan(&n)
		return err == nil && n > 0, fmt.Sprint(n, err)
	})
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.dims != 16 {
		t.Fatalf("EmbeddingDims beside a concurrent record: %d, %v; want the first record's 16", r.dims, r.err)
	}
	if d, err := s.EmbeddingDims(ctx, "m", 8); err != nil || d != 16 {
		t.Fatalf("EmbeddingDims of a recorded model: %d, %v", d, err)
	}
}
