package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
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
