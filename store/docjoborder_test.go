package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// The jobs of a forget's documents are locked in id order before their
// delete (deleteJobsWhere), not only deleted in one statement: that
// statement meets them in the table's order, which is not id order once a
// job's row was written again (a snooze, a retry). A dead process ran an
// index job a and a chunk embed job b of alice's document, and bob's job
// c, ids a < c < b, a's row written again since so that it lies after b;
// the takeover locks a, c, b in id order. The third transaction holds c:
// the takeover locks a and waits for c; the forget waits for a (deleting
// as the table lies, it held b first, and the takeover then waited for b).
func TestTakeOverBesideForgetOfDocumentJobsOutOfIDOrder(t *testing.T) {
	ctx, s := setup(t)
	coll := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "notes", DocID: "d", Content: "# Notes\n\nThe boat is blue.\n"}).Collection.ID
	args := fmt.Sprintf(`{"collection_id": %d, "doc_id": "d"}`, coll)
	ids := insertJobs(t, ctx, s, `
		(NULL, 'a', 'index_document', 'docs', 'running', '`+args+`'),
		(NULL, 'c', 'test_extract', 'extract', 'running', '{"owner": "bob", "turn_ids": ["b1"]}'),
		(NULL, 'b', 'memoryd_chunk_embed', 'embed', 'running', '`+args+`')`)
	if _, err := s.Pool().Exec(ctx, `UPDATE river_job SET scheduled_at = scheduled_at + interval '1 second' WHERE id = $1`, ids["a"]); err != nil {
		t.Fatal(err)
	}
	var order []int64
	if err := s.Pool().QueryRow(ctx, `SELECT array_agg(id ORDER BY ctid) FROM river_job WHERE id = ANY($1)`, []int64{ids["a"], ids["b"]}).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != fmt.Sprint([]int64{ids["b"], ids["a"]}) {
		t.Fatalf("alice's jobs lie in the order %v, want b, a (%d, %d)", order, ids["b"], ids["a"])
	}
	deadProcess(t, ctx, s)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["c"]); err != nil {
		t.Fatal(err)
	}
	takeover, took := waitingOn(t, s, holder, "the takeover", "the held job", func() error { return takeOver(ctx, s, nil) })
	_, forgot := waitingOn(t, s, takeover, "the forget", "the takeover", func() error {
		_, err := s.DeleteCollections(ctx, alice, docJobs...)
		return err
	})
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if terr, ferr := <-took, <-forgot; ferr != nil || terr != nil {
		t.Fatalf("takeover: %v; forget of documents: %v; want both done", terr, ferr)
	}
	var left int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job WHERE id = ANY($1)`, []int64{ids["a"], ids["b"]}).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d of the collection's jobs left (%v), want none", left, err)
	}
}

// The embed sweep (DeleteOrphanedEmbedJobs) leaves a job another
// transaction holds to its next run, and deletes the others: it waited
// for the holder, a forget of the job's user or a save for the whole of
// it, every other orphaned job kept meanwhile.
func TestDeleteOrphanedEmbedJobsSkipsAHeldJob(t *testing.T) {
	ctx, s := setup(t)
	ids := insertJobs(t, ctx, s, `
		(NULL, 'held', 'test_embed', 'embed', 'available', '{"owner": "alice", "model": "gone"}'),
		(NULL, 'free', 'test_embed', 'embed', 'available', '{"owner": "bob", "model": "gone"}')`)
	hold, holder := begin(t, s)
	if _, err := hold.Exec(ctx, `SELECT FROM river_job WHERE id = $1 FOR UPDATE`, ids["held"]); err != nil {
		t.Fatal(err)
	}
	var n int64
	swept := make(chan error, 1)
	go func() {
		var err error
		n, err = s.DeleteOrphanedEmbedJobs(ctx, []string{"test_embed"}, time.Microsecond)
		swept <- err
	}()
	if waiter := blockedBy(t, s, holder, func() bool { return len(swept) > 0 }, "the sweep to wait for the held job, or be done"); waiter != 0 {
		hold.Rollback(ctx)
		t.Fatalf("the sweep waited for the held job (backend %d), want it left to the next sweep", waiter)
	}
	if err := <-swept; err != nil || n != 1 {
		t.Fatalf("the sweep deleted %d jobs (%v), want 1", n, err)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := s.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(metadata->>'name'), '{}') FROM river_job WHERE id = ANY($1)`,
		[]int64{ids["held"], ids["free"]}).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[held]" {
		t.Fatalf("jobs left %v, want [held]", left)
	}
}
