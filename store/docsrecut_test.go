package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/memoryd/memoryd/store"
)

// TestPutDocumentCutsAgainAnotherChunking: a put of the content a
// document holds writes nothing while its chunking is the put's (or the
// put names none), and cuts the document again when it differs: the new
// chunks, the put's source and metadata and its chunking written, its
// put_at (the last put of new content, for a forget) kept. Before, such
// a put wrote nothing, and the document kept the chunks an older
// release cut until its content changed.
func TestPutDocumentCutsAgainAnotherChunking(t *testing.T) {
	ctx, s := setup(t)
	old := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide})
	putAt := func() time.Time {
		t.Helper()
		var at time.Time
		if err := s.Pool().QueryRow(context.Background(), `SELECT coalesce(put_at, created_at) FROM documents WHERE doc_id = 'app'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	first := putAt()
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide}); !r.Unchanged {
		t.Fatalf("a put naming no chunking: %+v, want unchanged", r)
	}
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python",
		Metadata: []byte(`{"v":2}`)})
	if r.Unchanged || r.Chunks == 0 || r.Hash != old.Hash {
		t.Fatalf("a put of another chunking: %+v, want it cut again", r)
	}
	var source, chunking, metadata, text string
	if err := s.Pool().QueryRow(context.Background(), `SELECT d.source, d.chunking, d.metadata::text, ch.text FROM documents d
		JOIN doc_chunks ch USING (collection_id, doc_id) WHERE d.doc_id = 'app' AND ch.chunk_index = 0`).Scan(&source, &chunking, &metadata, &text); err != nil {
		t.Fatal(err)
	}
	if source != "app.py" || chunking != "1 python@"+old.Hash[:12] || metadata != `{"v": 2}` || text[:9] != "```python" {
		t.Errorf("after the cut: source %q, chunking %q, metadata %s, chunk 0 %q", source, chunking, metadata, text)
	}
	if at := putAt(); !at.Equal(first) {
		t.Errorf("the cut moved put_at %v → %v: the content is the same", first, at)
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"}); !r.Unchanged {
		t.Errorf("a put of the same chunking again: %+v, want unchanged", r)
	}
}

// TestChunkVectorsOfChunksCutAgainAreNotSaved: an embedding job that read
// a document's chunks before a put cut the same content again (another
// chunking) saves no vector and records no refusal for the new chunks:
// their texts are not the ones it embedded. The content's hash, which
// such a save checked, is the same.
func TestChunkVectorsOfChunksCutAgainAreNotSaved(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide})
	ts := chunkTargets(t, ctx, s, r, "m")
	ws := chunkVectorWrites(t, ctx, s, r, "m")
	if len(ws) < 2 {
		t.Fatalf("%d targets, want 2 or more", len(ws))
	}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"})
	if n, err := s.SaveChunkEmbeddings(ctx, "m", r.Collection.ID, r.DocID, r.Hash, ws); err != nil || n != 0 {
		t.Errorf("vectors of the chunks cut before: %d saved (%v), want none", n, err)
	}
	if n, err := s.SaveChunkEmbeddingRefusals(ctx, "m", r.Collection.ID, r.DocID, r.Hash, ts[:2]); err != nil || n != 0 {
		t.Errorf("refusals of the chunks cut before: %d recorded (%v), want none", n, err)
	}
	if n := saveChunkVectors(t, ctx, s, r, "m"); n == 0 {
		t.Errorf("vectors of the new chunks: none saved")
	}
}

// TestCutAgainKeepsTheVectorsOfIdenticalChunks: a put that cuts the
// content a document holds again (an older chunking cut it) keeps the
// chunks the new cut has too, at the same index with the same heading
// path and text, and their vectors: nothing is left to embed. Before, the
// re-cut deleted every chunk's vector, and each document an older release
// cut was embedded again whole, searched without vectors meanwhile.
func TestCutAgainKeepsTheVectorsOfIdenticalChunks(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide})
	recutKeepsVectors(t, ctx, s, r, "a put of another chunking")
}

// recutKeepsVectors saves a vector of model m for each chunk of app.md (r),
// puts its content again under chunking "1" (what), and checks that the put
// cut it again into as many chunks, every one keeping its vector.
func recutKeepsVectors(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, what string) {
	t.Helper()
	n := saveChunkVectors(t, ctx, s, r, "m")
	if n < 2 {
		t.Fatalf("%d vectors saved, want 2 or more", n)
	}
	again := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1"})
	if again.Unchanged || again.Chunks != int(n) {
		t.Fatalf("%s: %+v, want it cut again into the same %d chunks", what, again, n)
	}
	if ts := chunkTargets(t, ctx, s, again, "m"); len(ts) != 0 {
		t.Errorf("after the re-cut (%s), %d of %d chunks to embed again; want none", what, len(ts), n)
	}
}

// oldReleaseSave saves a vector for each chunk of ws's indexes with the
// statement of a release before the chunk sums (migration 072's), which
// checks the content hash alone, as a serve of it does during a rolling
// upgrade, and returns how many were saved.
func oldReleaseSave(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, ws []store.ChunkEmbeddingWrite) int64 {
	t.Helper()
	idx, dims, vecs := make([]int32, len(ws)), make([]int32, len(ws)), make([][]byte, len(ws))
	for i, w := range ws {
		idx[i], dims[i], vecs[i] = int32(w.ChunkIndex), int32(w.Dims), w.Vector
	}
	tag, err := s.Pool().Exec(ctx, `
		INSERT INTO chunk_embeddings AS e (collection_id, doc_id, chunk_index, model, content_hash, dims, vector)
		SELECT d.collection_id, d.doc_id, ch.chunk_index, $4, d.content_hash, w.d, w.v
		FROM documents d
		JOIN unnest($5::int[], $6::int[], $7::bytea[]) AS w(i, d, v) ON true
		JOIN doc_chunks ch ON ch.collection_id = d.collection_id AND ch.doc_id = d.doc_id AND ch.chunk_index = w.i
		WHERE d.collection_id = $1 AND d.doc_id = $2 AND d.content_hash = $3 AND d.status = 'ready'
		ORDER BY ch.chunk_index
		ON CONFLICT (collection_id, model, doc_id, chunk_index) DO UPDATE
			SET content_hash = excluded.content_hash, dims = excluded.dims, vector = excluded.vector, created_at = now()`,
		r.Collection.ID, r.DocID, r.Hash, "m", idx, dims, vecs)
	if err != nil {
		t.Fatal(err)
	}
	return tag.RowsAffected()
}

// TestPreviousReleaseSavesNoVectorsOfChunksCutAgain: during a rolling
// upgrade, a chunk embedding job of the previous release, which read a
// document's chunks before this release cut the same content again,
// saves no vector onto the new chunks, whose texts it did not embed; its
// saves onto a document no release recording chunkings cut are kept.
// Before, it saved one onto every new chunk at an index it had read.
func TestPreviousReleaseSavesNoVectorsOfChunksCutAgain(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide})
	ws := chunkVectorWrites(t, ctx, s, r, "m")
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"})
	if n := oldReleaseSave(t, ctx, s, r, ws); n != 0 {
		t.Errorf("the previous release's job saved %d vectors of the chunks cut before onto those cut again; want none", n)
	}
	other := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "other", Source: "other.md", Content: guide})
	if n := oldReleaseSave(t, ctx, s, other, chunkVectorWrites(t, ctx, s, other, "m")); n != int64(other.Chunks) {
		t.Errorf("the previous release's job saved %d vectors of a document it cut; want %d", n, other.Chunks)
	}
	if n := saveChunkVectors(t, ctx, s, r, "m"); n == 0 {
		t.Errorf("this release's vectors of the new chunks: none saved")
	}
}

// TestPutDocumentCutsAgainWhatAPreviousReleaseRewrote: a serve of the
// release before migration 072, running beside this one during a rolling
// upgrade (or after a roll back), puts new content over a document this
// release cut: it writes the content, its hash and its own chunks, and
// leaves the chunking column, which it does not know, as this release
// wrote it. This release's next put of that content cuts it again.
// Before, the chunking matched the put's and the put wrote nothing, so the
// document kept the previous release's chunks (code without its
// declarations' headings) until its content changed again.
func TestPutDocumentCutsAgainWhatAPreviousReleaseRewrote(t *testing.T) {
	ctx, s := setup(t)
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"})
	// The previous release's put of new content, in its own statement's
	// terms: every column it knows rewritten, chunking left.
	edited := guide + "\nOne more paragraph.\n"
	if _, err := s.Pool().Exec(context.Background(), `UPDATE documents SET content = $1, content_hash = $2, size_bytes = $3,
		updated_at = now(), put_at = now() WHERE doc_id = 'app'`, edited, store.DocumentHash(edited), len(edited)); err != nil {
		t.Fatal(err)
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: edited, Chunking: "1 python"}); r.Unchanged {
		t.Errorf("a put of the content a previous release wrote: %+v, want it cut again", r)
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: edited, Chunking: "1 python"}); !r.Unchanged {
		t.Errorf("the put after: %+v, want unchanged", r)
	}
}

// TestPutDocumentCutsAgainWhatTheFirst072BuildLabelled: a document the
// first build of migration 072 cut holds its chunking without the hash
// ("1"): this release's next put of its content cuts it again once, and
// the chunks it cuts alike keep their vectors (nothing to embed again);
// the put after writes nothing.
func TestPutDocumentCutsAgainWhatTheFirst072BuildLabelled(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1"})
	if _, err := s.Pool().Exec(context.Background(), `UPDATE documents SET chunking = '1' WHERE doc_id = 'app'`); err != nil {
		t.Fatal(err)
	}
	recutKeepsVectors(t, ctx, s, r, "a put of a document the first 072 build labelled")
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1"}); !r.Unchanged {
		t.Errorf("the put after: %+v, want unchanged", r)
	}
}

// TestPutDocumentCutsAgainWhatAPreviousReleaseIndexed: a document this
// release put pending (its content too large to cut inline) whose index
// job a worker of the release before 072 ran (during a rolling upgrade,
// or after rolling back) holds that release's chunks; this release's next
// put of its content cuts it again.
func TestPutDocumentCutsAgainWhatAPreviousReleaseIndexed(t *testing.T) {
	ctx, s := setup(t)
	r, err := s.PutDocument(ctx, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.DocPending {
		t.Fatalf("a put without a chunker: %+v, want pending", r)
	}
	// The previous release's index job, in its own statements' terms:
	// its chunks written, the document marked ready, chunking left.
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO doc_chunks (collection_id, doc_id, chunk_index, heading_path, heading, text,
		byte_start, byte_end, ts_config, search, heading_len, text_len)
		VALUES ($1, 'app', 0, '{}', '', $2, 0, $3, 'english', to_tsvector('english', $2), 0, 1)`, r.Collection.ID, guide, len(guide)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), `UPDATE documents SET status = 'ready', chunks = 1, updated_at = now() WHERE doc_id = 'app'`); err != nil {
		t.Fatal(err)
	}
	if r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"}); r.Unchanged {
		t.Errorf("a put of the content a previous release's index job cut: %+v, want it cut again", r)
	}
	// This release's own index job: the put after writes nothing, and a
	// pending document put again pending is left as it is.
	own := store.DocumentPut{Owner: alice, Collection: "kb", DocID: "own", Source: "own.py", Content: guide, Chunking: "1 python"}
	for i := range 2 {
		if r, err := s.PutDocument(ctx, own); err != nil || r.Status != store.DocPending || r.Unchanged != (i == 1) {
			t.Fatalf("pending put %d: %+v, %v; want pending, unchanged the second time", i+1, r, err)
		}
	}
	if done, err := s.IndexDocument(ctx, r.Collection.ID, "own", r.Hash, chunkWith); err != nil || !done {
		t.Fatalf("index: %v, %v", done, err)
	}
	own.Chunk = chunkWith
	if r := put(t, ctx, s, own); !r.Unchanged {
		t.Errorf("a put of the content this release's index job cut: %+v, want unchanged", r)
	}
}

// oldReleasePut writes content into the document of r as a put of a
// release before migration 072 does, during a rolling upgrade: its
// statements verbatim, which know no chunking column, and its chunks cut
// into one (that release's chunker cut otherwise than this one's).
func oldReleasePut(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, content string) store.PutResult {
	t.Helper()
	r.Hash = store.DocumentHash(content)
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `
			INSERT INTO documents (collection_id, doc_id, source, content_hash, content, metadata, size_bytes, status, chunks, put_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
			ON CONFLICT (collection_id, doc_id) DO UPDATE SET source = excluded.source,
				content_hash = excluded.content_hash, content = excluded.content, metadata = excluded.metadata,
				size_bytes = excluded.size_bytes, status = excluded.status, chunks = excluded.chunks, updated_at = now(),
				put_at = now()`,
		r.Collection.ID, r.DocID, "app.md", r.Hash, content, []byte(`{}`), len(content), store.DocReady, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM doc_chunks WHERE collection_id = $1 AND doc_id = $2`, r.Collection.ID, r.DocID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO doc_chunks (collection_id, doc_id, chunk_index, heading_path, heading, text, byte_start, byte_end, ts_config,
			search, heading_len, text_len)
		SELECT $1, $2, (u.i - 1)::int, p.path, p.heading, u.t, u.s, u.e, $7,
			setweight(v.h || memoryd_camel_tsvector($7, p.heading), 'A') || setweight(v.t || memoryd_camel_tsvector($7, u.t), 'B'), length(v.h), length(v.t)
		FROM unnest($3::text[], $4::text[], $5::int[], $6::int[]) WITH ORDINALITY AS u(h, t, s, e, i),
		LATERAL (SELECT CASE WHEN u.h = '' THEN '{}'::text[] ELSE string_to_array(u.h, E'\x1f') END AS path) p0,
		LATERAL (SELECT p0.path, array_to_string(p0.path, ' > ') AS heading) p,
		LATERAL (SELECT memoryd_tsvector_base($7, p.heading) AS h, memoryd_tsvector_base($7, u.t) AS t) v`,
		r.Collection.ID, r.DocID, []string{""}, []string{content}, []int32{0}, []int32{int32(len(content))}, r.Collection.TSConfig); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPreviousReleasePutOfNewContentIsCutAgain: a document this release
// cut that a serve of a release before 072 puts again with new content
// during a rolling upgrade holds that release's cut, whatever the
// chunking column still says: this release's next put of that content
// cuts it again, and the previous release's vectors of its own cut are
// kept (073's trigger drops only those onto a cut of the current content
// this release made). review49 found the first 073 (a trigger on any
// recorded chunking) dropping them: "the previous release's job saved 0
// vectors of the chunks it cut itself; want 1".
func TestPreviousReleasePutOfNewContentIsCutAgain(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1"})
	content := guide + "\nStop the daemon before an upgrade.\n"
	old := oldReleasePut(t, ctx, s, r, content)
	ws := chunkVectorWrites(t, ctx, s, old, "m")
	if n := oldReleaseSave(t, ctx, s, old, ws); n != int64(len(ws)) {
		t.Errorf("the previous release's job saved %d vectors of the chunks it cut itself; want %d", n, len(ws))
	}
	again := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: content, Chunking: "1"})
	if again.Unchanged || again.Chunks < 2 {
		t.Errorf("this release's put of the content the previous release cut: %+v, want it cut again", again)
	}
}

// release072Save saves a vector for each chunk of ws with the statement
// of the release of migration 072 verbatim, which compares each chunk's
// sum but knows nothing of 073.
func release072Save(t *testing.T, ctx context.Context, s *store.Store, r store.PutResult, ws []store.ChunkEmbeddingWrite) int64 {
	t.Helper()
	idx, dims, vecs, sums := make([]int32, len(ws)), make([]int32, len(ws)), make([][]byte, len(ws)), make([]string, len(ws))
	for i, w := range ws {
		idx[i], dims[i], vecs[i], sums[i] = int32(w.ChunkIndex), int32(w.Dims), w.Vector, w.Sum
	}
	tag, err := s.Pool().Exec(ctx, `
			INSERT INTO chunk_embeddings AS e (collection_id, doc_id, chunk_index, model, content_hash, dims, vector)
			SELECT d.collection_id, d.doc_id, ch.chunk_index, $4, d.content_hash, w.d, w.v
			FROM documents d
			JOIN unnest($5::int[], $6::int[], $7::bytea[], $8::text[]) AS w(i, d, v, s) ON true
			JOIN doc_chunks ch ON ch.collection_id = d.collection_id AND ch.doc_id = d.doc_id AND ch.chunk_index = w.i
				AND md5(ch.heading_path::text || ch.text) = w.s
			WHERE d.collection_id = $1 AND d.doc_id = $2 AND d.content_hash = $3 AND d.status = 'ready'
			ORDER BY ch.chunk_index
			ON CONFLICT (collection_id, model, doc_id, chunk_index) DO UPDATE
				SET content_hash = excluded.content_hash, dims = excluded.dims, vector = excluded.vector, created_at = now()`,
		r.Collection.ID, r.DocID, r.Hash, "m", idx, dims, vecs, sums)
	if err != nil {
		t.Fatal(err)
	}
	return tag.RowsAffected()
}

// TestRelease072SavesBesideThisOne: during a rolling upgrade from the
// release of migration 072, whose saves compare each chunk's sum, its
// chunk embedding jobs save their vectors onto the documents this
// release cut, and still save none onto a chunk cut again since it was
// read. The first 073 dropped every write its own release did not mark,
// so 072's serves embedded (and paid for) every chunk in vain during the
// roll and after a roll back.
func TestRelease072SavesBesideThisOne(t *testing.T) {
	ctx, s := setup(t)
	r := put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.md", Content: guide, Chunking: "1 markdown"})
	ws := chunkVectorWrites(t, ctx, s, r, "m")
	if n := release072Save(t, ctx, s, r, ws[:1]); n != 1 {
		t.Errorf("072's job saved %d vectors onto a document this release cut; want 1", n)
	}
	put(t, ctx, s, store.DocumentPut{Owner: alice, Collection: "kb", DocID: "app", Source: "app.py", Content: guide, Chunking: "1 python"})
	if n := release072Save(t, ctx, s, r, ws[1:]); n != 0 {
		t.Errorf("072's job saved %d vectors of chunks cut again since it read them; want none", n)
	}
}
