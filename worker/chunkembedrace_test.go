package worker_test

import (
	"testing"

	"github.com/memoryd/memoryd/embedding/embeddingtest"
	"github.com/memoryd/memoryd/enricher"
	"github.com/memoryd/memoryd/extractor"
	"github.com/memoryd/memoryd/store"
	"github.com/memoryd/memoryd/worker"
)

// Chunk embed jobs in flight beside the lifecycle of their documents: a
// job that read its chunks and waits in its model request (held by the
// fake server) while the document is forgotten, replaced or deleted, and
// then saves, writes nothing: no vector of content a document no longer
// holds, none into a collection a forget deleted (also when the user puts
// the same document, of the same hash, again after the forget), and the
// document's current chunks end with exactly their own vectors.

// putInline puts a document of alice's, chunked in the put (its chunk
// embed jobs enqueued in its transaction).
func (e *env) putInline(collection, docID, content string) store.PutResult {
	e.t.Helper()
	r, err := e.store.PutDocument(e.ctx, store.DocumentPut{Owner: store.Owner{User: "alice"}, Collection: collection, DocID: docID,
		Content: content, Chunk: enricher.ChunkDocument})
	if err != nil {
		e.t.Fatal(err)
	}
	if r.Chunks < 2 {
		e.t.Fatalf("put %+v: want several chunks", r)
	}
	return r
}

// waitHeld waits until a request holding srv's held text waits.
func (e *env) waitHeld(srv *embeddingtest.Server) {
	e.t.Helper()
	e.waitFor("a chunk embed job's request held", func() (bool, string) { return srv.Held() > 0, "none held" })
}

// heldChunkEmbed starts a worker embedding with a fake server and puts
// alice's document "d" of 8 sections, whose chunk embed job it returns
// waiting in its model request until release (called at the test's end
// too); stop stops the worker.
func heldChunkEmbed(t *testing.T) (e *env, old store.PutResult, release, stop func()) {
	t.Helper()
	e = setup(t)
	srv := embeddingtest.New(t)
	release = srv.HoldContaining("narwhal")
	_, stop = e.startWorker(extractor.NewRules(), withEmbedder(embedder(t, srv, "m1"), -1))
	t.Cleanup(release) // before the worker's stop (cleanups run last first)
	old = e.putInline("kb", "d", sections("narwhal", 8))
	e.waitHeld(srv)
	return e, old, release, stop
}

// collectionLeft counts what is left of a collection: its row, documents,
// chunks, vectors, generation row and River jobs naming it.
func (e *env) collectionLeft(id int64) (rows, docs, chunks, vectors, gens, jobs int) {
	e.t.Helper()
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT (SELECT count(*) FROM collections WHERE id = $1),
		(SELECT count(*) FROM documents WHERE collection_id = $1), (SELECT count(*) FROM doc_chunks WHERE collection_id = $1),
		(SELECT count(*) FROM chunk_embeddings WHERE collection_id = $1),
		(SELECT count(*) FROM chunk_embedding_generations WHERE collection_id = $1),
		(SELECT count(*) FROM river_job WHERE args->'collection_id' = to_jsonb($1::bigint))`, id).
		Scan(&rows, &docs, &chunks, &vectors, &gens, &jobs); err != nil {
		e.t.Fatal(err)
	}
	return
}

// checkNothingLeft fails the test when anything of the collection is left
// (collectionLeft) when (a moment of the test) says.
func (e *env) checkNothingLeft(id int64, when string) {
	e.t.Helper()
	if c, d, ch, v, g, j := e.collectionLeft(id); c+d+ch+v+g+j != 0 {
		e.t.Fatalf("%s: collection %d, documents %d, chunks %d, vectors %d, generation rows %d, jobs %d; want nothing",
			when, c, d, ch, v, g, j)
	}
}

// checkOnlyCurrentVectors checks that the document's vectors of m1 are one
// per chunk of its current content, as checkChunkVectors, and that no
// other row of it is stored.
func (e *env) checkOnlyCurrentVectors(r store.PutResult) {
	e.t.Helper()
	e.checkChunkVectors(r.Collection.ID, "m1")
	var all, stale int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*), count(*) FILTER (WHERE e.content_hash <> d.content_hash)
		FROM chunk_embeddings e JOIN documents d USING (collection_id, doc_id) WHERE e.collection_id = $1 AND e.doc_id = $2`,
		r.Collection.ID, r.DocID).Scan(&all, &stale); err != nil {
		e.t.Fatal(err)
	}
	if all != r.Chunks || stale != 0 {
		e.t.Fatalf("%d vectors stored, %d of them of other content; want the current content's %d", all, stale, r.Chunks)
	}
}

// TestChunkEmbedJobBesideAForget: a forget of the user while a chunk
// embed job of theirs waits in its model request deletes the document,
// its chunks, vectors, jobs and collection; the user then puts the same
// document again (a new collection, the same content hash, its own job
// held too). Let go, the old job saves nothing into the forgotten
// collection, and the new document gets exactly its own vectors.
func TestChunkEmbedJobBesideAForget(t *testing.T) {
	e, old, release, stop := heldChunkEmbed(t)
	if _, err := worker.Forget(e.ctx, e.js, e.store, e.prefix, e.stream, "alice"); err != nil {
		t.Fatal(err)
	}
	e.checkNothingLeft(old.Collection.ID, "after the forget's ok")
	again := e.putInline("kb", "d", sections("narwhal", 8))
	if again.Collection.ID == old.Collection.ID || again.Hash != old.Hash {
		t.Fatalf("put after the forget: %+v; want a new collection and the same hash", again)
	}
	release()
	e.waitChunksEmbedded("alice", "m1", int64(again.Chunks))
	stop() // waits for the old job's save
	e.checkNothingLeft(old.Collection.ID, "after the old job ended")
	e.checkOnlyCurrentVectors(again)
	var vectors int
	if err := e.store.Pool().QueryRow(e.ctx, `SELECT count(*) FROM chunk_embeddings`).Scan(&vectors); err != nil || vectors != again.Chunks {
		t.Fatalf("%d vectors stored (%v); want the new document's %d", vectors, err, again.Chunks)
	}
}

// TestChunkEmbedJobBesideARePutOrADelete: a document replaced with new
// content, deleted, or deleted and put back with the same content while
// its chunk embed job waits in its model request ends, once the job is
// let go, with exactly its current chunks' vectors (or nothing when
// deleted), none of the content the job read.
func TestChunkEmbedJobBesideARePutOrADelete(t *testing.T) {
	for _, tc := range []string{"re-put", "delete", "delete and put back"} {
		t.Run(tc, func(t *testing.T) {
			e, old, release, stop := heldChunkEmbed(t)
			var now store.PutResult
			switch tc {
			case "re-put":
				now = e.putInline("kb", "d", sections("otter", 10)) // more chunks: each old one has a namesake
				e.waitChunksEmbedded("alice", "m1", int64(now.Chunks))
			case "delete", "delete and put back":
				ok, err := e.store.DeleteDocument(e.ctx, store.Owner{User: "alice"}, "kb", "d", worker.DocumentJobs()...)
				if err != nil || !ok {
					t.Fatalf("delete: %v, %v", ok, err)
				}
				if c, d, ch, v, _, j := e.collectionLeft(old.Collection.ID); c != 1 || d+ch+v+j != 0 {
					t.Fatalf("after the delete: collection %d, documents %d, chunks %d, vectors %d, jobs %d; want the collection alone", c, d, ch, v, j)
				}
				if tc == "delete and put back" {
					now = e.putInline("kb", "d", sections("narwhal", 8))
				}
			}
			release()
			if now.Chunks > 0 {
				e.waitChunksEmbedded("alice", "m1", int64(now.Chunks))
			}
			stop() // waits for the old job's save
			if now.Chunks > 0 {
				e.checkOnlyCurrentVectors(now)
				return
			}
			if c, d, ch, v, _, j := e.collectionLeft(old.Collection.ID); c != 1 || d+ch+v+j != 0 {
				t.Fatalf("after the old job ended: collection %d, documents %d, chunks %d, vectors %d, jobs %d; want the collection alone", c, d, ch, v, j)
			}
		})
	}
}
