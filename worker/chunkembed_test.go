package worker_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/memoryd/memoryd/embedding"
	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// sections is a Markdown document of n sections about topic.
func sections(topic string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "## %s %d\n\nThe %s fact number %d is here.\n\n", topic, i, topic, i)
	}
	return b.String()
}

// waitChunksEmbedded waits until every chunk of a ready document of user's
// collections (every collection's when empty) has a current vector of
// model, and at least min chunks exist.
func (e *env) waitChunksEmbedded(user, model string, min int64) store.EmbeddingCount {
	e.t.Helper()
	var n store.EmbeddingCount
	e.waitFor(fmt.Sprintf("chunks of %q embedded with %s", user, model), func() (bool, string) {
		var err error
		n, err = e.store.CountChunkEmbeddings(e.ctx, user, model)
		if err != nil {
			return false, err.Error()
		}
		return n.Items >= min && n.Embedded == n.Items, fmt.Sprintf("%+v", n)
	})
	return n
}

// checkChunkVectors checks that the collection's vectors of model are the
// fake server's vectors of its chunks' current text (heading path, newline,
// text), one per chunk.
func (e *env) checkChunkVectors(collectionID int64, model string) {
	e.t.Helper()
	cv, err := e.store.CollectionVectors(e.ctx, collectionID, model)
	if err != nil {
		e.t.Fatal(err)
	}
	if cv.Generation == 0 {
		e.t.Errorf("collection %d has vectors and generation 0", collectionID)
	}
	var n int
	docs := map[string]bool{}
	for _, v := range cv.Vectors {
		docs[v.DocID] = true
	}
	text := map[string]string{}
	for d := range docs {
		var hash string
		if err := e.store.Pool().QueryRow(e.ctx, `SELECT content_hash FROM documents WHERE collection_id = $1 AND doc_id = $2`,
			collectionID, d).Scan(&hash); err != nil {
			e.t.Fatal(err)
		}
		// Every chunk lacks a vector of a model never used: its text.
		ts, err := e.store.ChunkEmbeddingTargets(e.ctx, collectionID, d, hash, 0, 1<<30, "never")
		if err != nil {
			e.t.Fatal(err)
		}
		n += len(ts)
		for _, t := range ts {
			text[fmt.Sprintf("%s/%d", d, t.ChunkIndex)] = strings.Join(t.HeadingPath, " > ") + "\n" + t.Text
		}
	}
	if len(cv.Vectors) != n || n == 0 {
		e.t.Fatalf("%d vectors of %s for %d chunks", len(cv.Vectors), model, n)
	}
	for _, v := range cv.Vectors {
		q, err := embedding.Decode(v.Vector, v.Dims)
		if err != nil {
			e.t.Fatal(err)
		}
		if cos := q.Dot(embeddingtest.Vector(text[fmt.Sprintf("%s/%d", v.DocID, v.ChunkIndex)], v.Dims)); cos < 0.98 {
			e.t.Errorf("chunk %s/%d: cosine with its text's vector %.3f, want ≈1", v.DocID, v.ChunkIndex, cos)
		}
	}
}

func (e *env) chunkJobs() int {
	e.t.Helper()
	var n int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, worker.ChunkEmbedJobKind).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestChunkEmbedJobs: a put chunked inline and a document chunked by its
// index job both get chunk vectors from jobs enqueued in their
// transactions (the sweep is off); an unchanged re-put enqueues nothing; a
// re-put with new content drops the old vectors with the old chunks in its
// transaction, and the new chunks get their own.
func TestChunkEmbedJobs(t *testing.T) {
	e := setup(t)
	srv := embeddingtest.New(t)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	alice := store.Owner{User: "alice"}
	put := func(collection, content string, inline bool) store.PutResult {
		t.Helper()
		var r store.PutResult
		err := e.store.InTx(e.ctx, func(tx pgx.Tx, q *store.Store) (err error) {
			p := store.DocumentPut{Owner: alice, Collection: collection, DocID: "d", Content: content}
			if inline {
				p.Chunk = enricher.ChunkDocument
			}
			if r, err = q.PutDocument(e.ctx, p); err != nil || inline || r.Unchanged {
				return err
			}
			_, err = w.EnqueueIndexDocument(e.ctx, tx, r.Collection.ID, r.DocID, r.Hash)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	r := put("kb", sections("otter", 6), true)
	if r.Chunks < 2 {
		t.Fatalf("put %+v: want several chunks", r)
	}
	e.waitChunksEmbedded("alice", "m1", int64(r.Chunks))
	e.checkChunkVectors(r.Collection.ID, "m1")

	jobs := e.chunkJobs()
	if again := put("kb", sections("otter", 6), true); !again.Unchanged || e.chunkJobs() != jobs {
		t.Fatalf("unchanged re-put %+v: %d chunk jobs, was %d", again, e.chunkJobs(), jobs)
	}

	old := r.Hash
	r = put("kb", sections("badger", 4), true)
	var stale int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM chunk_embeddings WHERE content_hash = $1`, old).Scan(&stale); err != nil || stale != 0 {
		t.Fatalf("after the re-put, %d vectors of the old content (%v)", stale, err)
	}
	e.waitChunksEmbedded("alice", "m1", int64(r.Chunks))
	e.checkChunkVectors(r.Collection.ID, "m1")

	big := put("big", sections("narwhal", 30), false)
	if big.Status != store.DocPending {
		t.Fatalf("put %+v: want pending", big)
	}
	e.waitFor("big indexed", func() (bool, string) {
		docs, _, err := e.store.ListDocuments(e.ctx, alice, "big", "", 1)
		if err != nil {
			return false, err.Error()
		}
		return docs[0].Status == store.DocReady, docs[0].Status
	})
	e.waitChunksEmbedded("alice", "m1", int64(r.Chunks)+30)
	e.checkChunkVectors(big.Collection.ID, "m1")
}

// TestChunkEmbedBackfill: chunks stored before embedding was on get vectors
// when a backfill enqueues them: a user's own collections only with a
// user, every collection (shared ones included) without; a second backfill
// finds nothing missing.
func TestChunkEmbedBackfill(t *testing.T) {
	e := setup(t)
	for _, p := range []struct {
		o    store.Owner
		name string
	}{{store.Owner{User: "alice"}, "kb"}, {store.Owner{User: "bob"}, "kb"}, {store.Owner{Shared: "team"}, "wiki"}} {
		if _, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: p.o, Collection: p.name, DocID: "d",
			Content: sections("heron", 3), Chunk: enricher.ChunkDocument}); err != nil {
			t.Fatal(err)
		}
	}
	srv := embeddingtest.New(t)
	w, _ := e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	if n, err := w.Enqueuer().EnqueueMissingChunkEmbeddings(e.ctx, "alice", "m1", 2, 5); err != nil || n != 1 {
		t.Fatalf("alice's backfill enqueued %d documents (%v), want 1", n, err)
	}
	e.waitChunksEmbedded("alice", "m1", 1)
	if n, _ := e.store.CountChunkEmbeddings(e.ctx, "bob", "m1"); n.Embedded != 0 || n.Items == 0 {
		t.Errorf("bob's chunks after alice's backfill: %+v, want none embedded", n)
	}
	if n, err := w.Enqueuer().EnqueueMissingChunkEmbeddings(e.ctx, "", "m1", 2, 5); err != nil || n != 2 {
		t.Fatalf("the full backfill enqueued %d documents (%v), want bob's and the shared one", n, err)
	}
	e.waitChunksEmbedded("", "m1", 9)
	if n, err := w.Enqueuer().EnqueueMissingChunkEmbeddings(e.ctx, "", "m1", 2, 5); err != nil || n != 0 {
		t.Errorf("second backfill found %d documents (%v), want 0", n, err)
	}
}

// TestChunkEmbedJobTakenOver: the running chunk embed job of a dead
// process is replaced with the attempts it had left, as an embed job is,
// and the replacement embeds the chunks.
func TestChunkEmbedJobTakenOver(t *testing.T) {
	e := setup(t)
	r, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: "ann"}, Collection: "kb", DocID: "d",
		Content: sections("ibis", 3), Chunk: enricher.ChunkDocument})
	if err != nil {
		t.Fatal(err)
	}
	client, err := river.NewClient(riverpgxv5.New(e.store.Pool()), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Insert(e.ctx, worker.ChunkEmbedArgs{CollectionID: r.Collection.ID, DocID: "d", Hash: r.Hash, From: 0, To: r.Chunks, Model: "m1"},
		&river.InsertOpts{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO memoryd_processes (id, heartbeat_at) VALUES ('crashed', now() - interval '1 hour')`)
	e.exec(`UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = ARRAY['crashed'] WHERE id = $1`, res.Job.ID)

	srv := embeddingtest.New(t)
	e.start(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	e.waitChunksEmbedded("ann", "m1", int64(r.Chunks))
	if s := e.jobState(res.Job.ID); s != "cancelled" {
		t.Errorf("the dead process's job is %s, want cancelled", s)
	}
	var attempts int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT max_attempts FROM river_job
		WHERE kind = $1 AND metadata->>'memoryd_replaces' IS NOT NULL`, worker.ChunkEmbedJobKind).Scan(&attempts); err != nil || attempts != 2 {
		t.Errorf("replacement's attempts %d (%v), want the 2 left", attempts, err)
	}
}
