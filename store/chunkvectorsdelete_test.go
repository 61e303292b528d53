package store_test

import (
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestSaveChunkEmbeddingsDuringACollectionDeletion: a chunk vector save
// and the deletion of its collection (a forget's DeleteCollections) that
// meet do not deadlock. The save held its foreign key locks on a
// document's chunks, then the collection's generation row; the deletion
// held the generation row (the cascade from another document's vectors)
// and then waited for those chunks: Postgres killed one of them, and when
// it was the forget's, the forget answered a 500 with the documents left
// (a race hunt: "delete collections: ERROR: deadlock detected", under puts
// and chunk embedding of the user's documents). Now the save takes the
// collection's key share lock first, as a put does, so the deletion waits
// for it or the save for the deletion.
func TestSaveChunkEmbeddingsDuringACollectionDeletion(t *testing.T) {
	ctx, s := setup(t)
	a := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "a", Content: guide})
	b := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "b", Content: guide + "\nMore text.\n"})
	if b.Chunks < 2 {
		t.Fatalf("document b has %d chunks, want 2 or more", b.Chunks)
	}
	// Document a has vectors, so that deleting its chunks moves the
	// collection's generation (the row the save writes last).
	saveChunkVectors(t, ctx, s, a, "m")
	ws := chunkVectorWrites(t, ctx, s, b, "m")
	if len(ws) != b.Chunks {
		t.Fatalf("%d chunks to embed, want %d", len(ws), b.Chunks)
	}
	// b's last chunk locked, so that the save stops in its foreign key
	// checks, holding the key share locks of b's other chunks.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM doc_chunks WHERE collection_id = $1 AND doc_id = $2 AND chunk_index = $3 FOR UPDATE`,
		b.Collection.ID, b.DocID, b.Chunks-1); err != nil {
		t.Fatal(err)
	}
	saved := saveWaitingOnALock(t, s, tx, "INSERT INTO chunk_embeddings", func() (int64, error) {
		return s.SaveChunkEmbeddings(ctx, "m", b.Collection.ID, b.DocID, b.Hash, ws)
	})
	// The deletion, until it waits on the save (or on the lock above): in
	// its lock of the collections or its delete.
	type deleted struct {
		n   int64
		err error
	}
	del := make(chan deleted, 1)
	go func() {
		n, err := s.DeleteCollections(ctx, alice)
		del <- deleted{n, err}
	}()
	var holder int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		// This test's deletion: blocked by the lock above or by the save
		// (which the lock above blocks), not another test's or database's.
		var waiting int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity d
			WHERE (d.query LIKE '%DELETE FROM collections%' OR d.query LIKE '%FROM collections WHERE%ORDER BY id FOR UPDATE%') AND ($1 = ANY(pg_blocking_pids(d.pid)) OR EXISTS (
				SELECT 1 FROM pg_stat_activity w WHERE $1 = ANY(pg_blocking_pids(w.pid)) AND w.pid = ANY(pg_blocking_pids(d.pid))))`, holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case d := <-del:
			t.Fatalf("the deletion did not wait for the save: %d documents, %v", d.n, d.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the deletion did not wait on a lock within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if res := <-saved; res.err != nil {
		t.Errorf("save beside the collection's deletion: %d saved, %v", res.n, res.err)
	}
	if d := <-del; d.err != nil || d.n != 2 {
		t.Fatalf("the collection's deletion beside a save: %d documents, %v; want 2 and no error", d.n, d.err)
	}
	var docs, chunks, vectors, terms int
	if err := s.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM doc_chunks),
		(SELECT count(*) FROM chunk_embeddings), (SELECT count(*) FROM chunk_terms)`).Scan(&docs, &chunks, &vectors, &terms); err != nil {
		t.Fatal(err)
	}
	if docs+chunks+vectors+terms != 0 {
		t.Fatalf("left after the deletion: %d documents, %d chunks, %d vectors, %d chunk terms", docs, chunks, vectors, terms)
	}
}
