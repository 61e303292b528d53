package store_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memoryd/memoryd/store"
)

// TestSaveChunkEmbeddingsOvertakenByACommittedRePut: a chunk embed job's
// save of a document's old content, whose statement took its snapshot
// before a re-put with new content committed and wrote its rows after it
// (and after the new content's own job saved its vectors), saves nothing
// of the old content: every vector of the document is then the new
// content's. The save's statement read the old content and chunks in its
// snapshot; its ON CONFLICT replaced the new content's vectors (rows of
// the same chunk indexes, committed since) with the old ones, whose hash
// no reader takes, so the new chunks had no vector and were searched by
// their words alone until a sweep; with no new vector yet its rows went
// in, the foreign key met the new chunks of the same indexes. Now the save
// holds the document's row, of the content it embeds, while it writes:
// the re-put waits for it and its new chunks take the old vectors with
// the old chunks, but for those of the chunks it cuts alike, which it
// saves again under the new content (its job saves the changed one's).
//
// The save's statement is held after its snapshot by a row trigger the
// test adds (waiting on an advisory lock the test holds), as a large save
// (thousands of chunks, one statement) is.
func TestSaveChunkEmbeddingsOvertakenByACommittedRePut(t *testing.T) {
	ctx, s := setup(t)
	old := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide", Content: guide})
	ws := chunkVectorWrites(t, ctx, s, old, "m")
	if len(ws) < 2 {
		t.Fatalf("%d chunks to embed, want 2 or more", len(ws))
	}
	key := rand.Int64()
	if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`
		CREATE FUNCTION test_hold_save() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(%d); RETURN NEW; END $$;
		CREATE TRIGGER test_hold_save BEFORE INSERT ON chunk_embeddings FOR EACH ROW
			WHEN (NEW.content_hash = '%s') EXECUTE FUNCTION test_hold_save()`, key, old.Hash)); err != nil {
		t.Fatal(err)
	}
	hold, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	saved := saveWaitingOnALock(t, s, hold, "INSERT INTO chunk_embeddings", func() (int64, error) {
		return s.SaveChunkEmbeddings(ctx, "m", old.Collection.ID, old.DocID, old.Hash, ws)
	})

	// The re-put, and its own job's save of the new content's vectors.
	type reput struct {
		r     store.PutResult
		saved int64
		err   error
	}
	done := make(chan reput, 1)
	go func() {
		r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide", Content: guide + "\nRead the release notes.\n", Chunk: chunkWith})
		if err != nil {
			done <- reput{err: err}
			return
		}
		ts, err := s.ChunkEmbeddingTargets(ctx, r.Collection.ID, r.DocID, r.Hash, 0, 1000, "m")
		if err != nil {
			done <- reput{err: err}
			return
		}
		nws := make([]store.ChunkEmbeddingWrite, len(ts))
		for i, tg := range ts {
			nws[i] = store.ChunkEmbeddingWrite{ChunkIndex: tg.ChunkIndex, Sum: tg.Sum, Dims: 4, Vector: []byte{0, 0, 128, 63, 9, 9, 9, 9}}
		}
		n, err := s.SaveChunkEmbeddings(ctx, "m", r.Collection.ID, r.DocID, r.Hash, nws)
		done <- reput{r, n, err}
	}()
	// Until the re-put and its save are done, or the re-put waits for the
	// held save.
	var holder int
	if err := hold.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	var res reput
	finished := false
	deadline := time.Now().Add(time.Minute)
	for !finished {
		var waiting int
		if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity d WHERE d.query LIKE '%FROM documents%FOR UPDATE%'
			AND EXISTS (SELECT 1 FROM pg_stat_activity w WHERE $1 = ANY(pg_blocking_pids(w.pid)) AND w.pid = ANY(pg_blocking_pids(d.pid)))`,
			holder).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case res = <-done:
			finished = true
			continue
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the re-put neither finished nor waited for the save within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := hold.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-saved; r.err != nil {
		t.Fatalf("old content's save: %d saved, %v", r.n, r.err)
	}
	if !finished {
		res = <-done
	}
	if res.err != nil {
		t.Fatalf("re-put and its save: %v", res.err)
	}
	// The edit appended to the last chunk: the others keep their vectors.
	if res.r.Chunks != len(ws) || res.saved != 1 {
		t.Fatalf("re-put: %d chunks, %d vectors saved; want %d, the last one's saved (the others' carried by the put)", res.r.Chunks, res.saved, len(ws))
	}
	rows, err := s.Pool().Query(ctx, `SELECT e.chunk_index, e.content_hash = d.content_hash FROM chunk_embeddings e
		JOIN documents d ON d.collection_id = e.collection_id AND d.doc_id = e.doc_id
		WHERE e.collection_id = $1 AND e.model = 'm' ORDER BY 1`, old.Collection.ID)
	if err != nil {
		t.Fatal(err)
	}
	type vec struct {
		Index   int
		Current bool
	}
	vs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[vec])
	if err != nil {
		t.Fatal(err)
	}
	current := 0
	for _, v := range vs {
		if !v.Current {
			t.Errorf("chunk %d's vector is of the old content", v.Index)
			continue
		}
		current++
	}
	if current != res.r.Chunks || len(vs) != res.r.Chunks {
		t.Fatalf("%d vectors, %d of them of the new content; want one for each of its %d chunks", len(vs), current, res.r.Chunks)
	}
	if n := collectionVectors(t, ctx, s, old.Collection.ID, "m"); len(n.Vectors) != res.r.Chunks {
		t.Fatalf("a search reads %d vectors, want the new content's %d", len(n.Vectors), res.r.Chunks)
	}
}
