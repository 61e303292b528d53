package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/events/eventstest"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/store/storetest"
	"github.com/memoryd/memoryd/worker"
)

// A forget whose delete of the user's documents Postgres rolls back to
// break a deadlock (40P01) redoes it, as it redoes its database side: it
// answered "incomplete" and left the documents to the next start. The
// third transaction holds a job of alice's document, which the forget's
// delete locks last (having deleted the collection), then asks for the
// collection: a cycle. Its own deadlock_timeout is long and the forget's
// 5 s, so that the forget, whose wait began first, is the one Postgres
// rolls back.
func TestForgetRedoesADocumentsDeleteRolledBackForADeadlock(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	s := storetest.Unmigrated(t, storetest.Migrated(t)+"&deadlock_timeout=5s")
	put, err := s.PutDocument(ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts)
		VALUES ($1, jsonb_build_object('collection_id', $2::bigint, 'doc_id', 'd'), 'q', 'available', 5)`,
		worker.IndexDocumentJobKind, put.Collection.ID); err != nil {
		t.Fatal(err)
	}
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SET LOCAL deadlock_timeout = '10min'`); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE kind = $1 FOR UPDATE`, worker.IndexDocumentJobKind); err != nil {
		t.Fatal(err)
	}
	var r worker.ForgetResult
	forgot := make(chan error, 1)
	go func() {
		var err error
		r, err = worker.Forget(ctx, e.js, s, e.prefix, e.stream, "alice")
		forgot <- err
	}()
	eventstest.Eventually(t, "the forget to wait for the held job", 30*time.Second, func() (bool, string) {
		if len(forgot) > 0 {
			return true, ""
		}
		var waiting int
		err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, holder).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprint(waiting, err)
	})
	if len(forgot) > 0 {
		t.Fatalf("the forget ended before it waited for the held job: %v", <-forgot)
	}
	// The cycle: the holder waits for the collection the forget deleted.
	if _, err := hold.Exec(ctx, `SELECT FROM collections WHERE id = $1 FOR KEY SHARE`, put.Collection.ID); err != nil {
		t.Fatalf("the holder's wait for the collection: %v (want the forget rolled back, not the holder)", err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-forgot; err != nil {
		t.Fatalf("forget: %v; want it done, its documents' delete redone", err)
	}
	if r.Documents != 1 {
		t.Errorf("the forget reports %d documents, want 1", r.Documents)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM collections) + (SELECT count(*) FROM river_job WHERE kind = $1)`, worker.IndexDocumentJobKind).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d collections or document jobs left (%v), want none", left, err)
	}
}
