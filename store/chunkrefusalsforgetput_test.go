package store_test

import (
	"fmt"
	"testing"

	"github.com/memoryd/memoryd/store"
)

// TestForgetChunkRefusalsBesidePutOfNewContent: a forget of a model's
// chunk refusals (embed --backfill --retry-refused, --dims) beside a put
// of new content leaves none of them under the new content. The put
// keeps the refusals of the chunks it cuts alike (keptChunkVectors):
// read before the forget deleted them, and saved again after it
// committed, they came back, and the retry the operator asked for left
// those chunks out. Now the forget locks the documents holding the
// refusals, as deleteOtherModelChunks does: it waits for the put and
// then deletes what the put kept. The put is held after its read, at
// its delete of the old chunks (holdStatements).
func TestForgetChunkRefusalsBesidePutOfNewContent(t *testing.T) {
	for _, stale := range []bool{false, true} {
		t.Run(fmt.Sprintf("stale=%v", stale), func(t *testing.T) {
			ctx, s := setup(t)
			p := store.DocumentPut{Owner: alice, Collection: "kb", DocID: "guide", Content: guide, Chunk: chunkWith}
			r := put(t, ctx, s, p)
			if n, err := s.SaveChunkEmbeddingRefusals(ctx, "m", r.Collection.ID, r.DocID, r.Hash, chunkTargets(t, ctx, s, r, "m")[:1]); err != nil || n != 1 {
				t.Fatalf("recorded %d refusals (%v), want 1", n, err)
			}
			if stale {
				// The model behind the name changed since the refusal.
				if _, err := s.EmbeddingDims(ctx, "m", 4); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Pool().Exec(ctx, `UPDATE embedding_models SET recorded_at = now() + interval '1 minute' WHERE model = 'm'`); err != nil {
					t.Fatal(err)
				}
			}
			held := holdStatements(t, s, "DELETE", "doc_chunks")
			// One sentence of the last chunk edited: chunk 0 is cut alike.
			p.Content = guide + "\nRead the release notes.\n"
			var edited store.PutResult
			putDone := make(chan error, 1)
			go func() {
				var err error
				edited, err = s.PutDocument(ctx, p)
				putDone <- err
			}()
			held.waits("the put held after its delete of the old chunks")
			// The forget, until it is done or waits for the held put.
			type forgot struct {
				n   int64
				err error
			}
			forgetDone := make(chan forgot, 1)
			go func() {
				var f forgot
				if stale {
					_, f.n, f.err = s.ForgetStaleEmbeddingRefusals(ctx, "alice", "m")
				} else {
					f.n, f.err = s.ForgetChunkEmbeddingRefusals(ctx, "alice", "m")
				}
				forgetDone <- f
			}()
			var f forgot
			finished := waitBlockedByOrDone(t, s, held, func() bool {
				select {
				case f = <-forgetDone:
					return true
				default:
					return false
				}
			}, "the forget finished or waiting for the put")
			held.release()
			if err := <-putDone; err != nil {
				t.Fatalf("put: %v", err)
			}
			if !finished {
				f = <-forgetDone
			}
			if f.err != nil {
				t.Fatalf("forget: %v", f.err)
			}
			var left int
			if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM chunk_embedding_refusals WHERE collection_id = $1 AND model = 'm'`, r.Collection.ID).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if ts := chunkTargets(t, ctx, s, edited, "m"); left != 0 || len(ts) != edited.Chunks {
				t.Errorf("after a forget of the refusals (%d forgotten) beside the put, %d refusals left, %d of %d chunks to embed; want none left, all to embed", f.n, left, len(ts), edited.Chunks)
			}
		})
	}
}
