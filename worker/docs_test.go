package worker_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// TestIndexDocumentJob puts a document pending with its job enqueued in the
// put's transaction, as the docs endpoint does for a large one, and checks
// that a running worker makes it searchable (a stale job's no-op is
// store.TestPendingDocumentIndexedLater's).
func TestIndexDocumentJob(t *testing.T) {
	e := setup(t)
	w, _ := e.startWorker(extractor.NewRules(), nil)
	alice := store.Owner{User: "alice"}
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "## Section %d\n\nThe narwhal fact number %d is here.\n\n", i, i)
	}
	doc := b.String()
	put := func(content string) (store.PutResult, int64) {
		var (
			r   store.PutResult
			job int64
		)
		err := e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) (err error) {
			if r, err = q.PutDocument(e.ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "d", Content: content}); err != nil {
				return err
			}
			job, err = w.EnqueueIndexDocument(e.ctx, tx, r.Collection.ID, r.DocID, r.Hash)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, job
	}
	r, job := put(doc)
	if r.Status != store.DocPending || job == 0 {
		t.Fatalf("put = %+v, job %d", r, job)
	}
	e.waitFor("document indexed", func() (bool, string) {
		docs, _, err := e.store.ListDocuments(e.ctx, alice, "big", "", 1)
		if err != nil {
			return false, err.Error()
		}
		return docs[0].Status == store.DocReady, fmt.Sprintf("%+v", docs[0])
	})
	hits, err := e.store.SearchChunks(e.ctx, store.ChunkQuery{Reader: alice, Keywords: []string{"narwhal"}}, enricher.ChunkRanker(0, 100))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 50 {
		t.Fatalf("narwhal in %d chunks, want 50", len(hits))
	}
}

// TestIndexJobOfAPutBehindARunningNoOp: a put that makes a document pending
// gets a job that will chunk it, even when the job of its content is still
// running but has already read the document and found other content. A
// race hunt's order: put A (large, pending, job J), put B (ready) holding
// the document's row while J starts and waits for it, put A again queued
// behind J; B commits, J finds B and does nothing, A is written pending
// and its job insert, unique by arguments, found J still running (River
// marks it completed only after) and answered J's id: the document stayed
// pending for good, the put having said it would be chunked. J is held
// running here as River holds it, its read made by IndexDocument itself.
func TestIndexJobOfAPutBehindARunningNoOp(t *testing.T) {
	e := setup(t)
	w, err := worker.New(worker.Config{Conn: e.nc, Store: e.store, Extractor: extractor.NewRules(), Logger: slog.New(slog.DiscardHandler),
		Prefix: e.prefix, Stream: e.stream, JobRetryBase: 10 * time.Millisecond, FetchPollInterval: testFetchPoll, FetchCooldown: testFetchCooldown,
		RetryBackoff: 50 * time.Millisecond, ChunkDocument: enricher.ChunkDocument})
	if err != nil {
		t.Fatal(err)
	}
	alice := store.Owner{User: "alice"}
	put := func(content string, chunk store.Chunker) (store.PutResult, int64) {
		var (
			r   store.PutResult
			job int64
		)
		err := e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) (err error) {
			if r, err = q.PutDocument(e.ctx, store.DocumentPut{Owner: alice, Collection: "big", DocID: "d", Content: content, Chunk: chunk}); err != nil {
				return err
			}
			if r.Status == store.DocPending {
				job, err = w.EnqueueIndexDocument(e.ctx, tx, r.Collection.ID, r.DocID, r.Hash)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, job
	}
	a := "# A\n\nThe narwhal swims in cold water.\n"
	ra, j := put(a, nil)
	if ra.Status != store.DocPending || j == 0 {
		t.Fatalf("put of A = %+v, job %d", ra, j)
	}
	// J fetched: running, as River marks it.
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() WHERE id = $1`, j)
	if rb, _ := put("# B\n\nThe walrus rests on ice.\n", enricher.ChunkDocument); rb.Status != store.DocReady {
		t.Fatalf("put of B = %+v", rb)
	}
	// J's read: B, so nothing to do.
	if done, err := e.store.IndexDocument(e.ctx, ra.Collection.ID, ra.DocID, ra.Hash, enricher.ChunkDocument); err != nil || done {
		t.Fatalf("J on B: indexed %v, %v; want a no-op", done, err)
	}
	ra2, j2 := put(a, nil)
	if ra2.Status != store.DocPending || j2 == 0 {
		t.Fatalf("put of A again = %+v, job %d", ra2, j2)
	}
	// J's Work returned: River marks it completed.
	e.exec(`UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, j)
	if j2 == j {
		t.Fatalf("put of A again after B answered job %d, the running job that found B and did nothing: A stays pending for good", j)
	}
	e.run("worker", w)
	e.waitFor("A indexed", func() (bool, string) {
		docs, _, err := e.store.ListDocuments(e.ctx, alice, "big", "", 1)
		if err != nil {
			return false, err.Error()
		}
		return docs[0].Status == store.DocReady && docs[0].Hash == ra.Hash, fmt.Sprintf("%+v (job %d: %s)", docs[0], j2, e.jobState(j2))
	})
}
